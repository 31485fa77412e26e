"""``torch.nn.modules.distance``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.loss_more import CosineSimilarity
from staticgrad.nn.margin_losses import PairwiseDistance

__all__ = ["CosineSimilarity", "PairwiseDistance"]
