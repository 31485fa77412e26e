"""``torch.nn.modules.sparse``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.sparse import Embedding

__all__ = ["Embedding"]

from staticgrad.nn.layers_more import EmbeddingBag

__all__ += ["EmbeddingBag"]
