"""``torch.nn.modules.distance``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.loss_more import CosineSimilarity

__all__ = ["CosineSimilarity"]
