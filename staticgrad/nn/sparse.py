"""embedding and Embedding: look up rows of a weight matrix by integer index."""

from __future__ import annotations

from staticgrad._eager.creation import empty
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.grad_mode import no_grad
from staticgrad.nn import init
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter
from staticgrad.ops import OPS


def _padding_index(padding_idx, num_embeddings: int) -> int:
    """PyTorch's normalization: a negative index counts from the end; None is -1."""
    if padding_idx is None:
        return -1
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return padding_idx % num_embeddings


def renorm_rows(weight, input, max_norm, norm_type=2.0):
    """Rescale in place, without a gradient, the rows of ``weight`` that ``input`` names whose norm
    exceeds max_norm (PyTorch's embedding_renorm_, what embedding does when given max_norm)."""
    with no_grad():
        dispatch_inplace(OPS["embedding_renorm"], weight, (input,), {"max_norm": float(max_norm),
                                                                     "norm_type": float(norm_type)})


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """``weight[input]`` (EmbeddingBackward0); the padding row receives no gradient. With max_norm, the
    rows looked up are first renormalised in place (no gradient), as PyTorch's."""
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("staticgrad's embedding computes dense, unscaled gradients only; "
                                  "use scale_grad_by_freq=False and sparse=False")
    if weight._data.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if input._data.dtype.name not in ("int64", "int32"):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got staticgrad.{input.dtype.tensor_type} instead (while checking "
                           "arguments for embedding)")
    if max_norm is not None:
        renorm_rows(weight, input, max_norm, norm_type)
    num_weights = weight._data.shape[0]
    attrs = {"num_weights": num_weights, "padding_idx": _padding_index(padding_idx, num_weights)}
    return dispatch(OPS["embedding"], (weight, input), attrs)


class Embedding(Module):
    """A lookup table initialised from N(0, 1), its padding row (if any) zero."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight=None, _freeze: bool = False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = None if padding_idx is None else _padding_index(padding_idx, num_embeddings)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim, dtype=dtype), requires_grad=not _freeze)
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx=None, max_norm=None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, sparse: bool = False):
        """An Embedding whose table is ``embeddings`` (2-D), frozen unless ``freeze=False``."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx, max_norm=max_norm,
                   norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        return embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                         self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text
