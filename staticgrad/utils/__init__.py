"""staticgrad.utils: PyTorch's ``torch.utils`` faces (``utils.data``, ``utils.checkpoint``)."""

from staticgrad.utils import checkpoint, data

__all__ = ["checkpoint", "data"]
