"""staticgrad.utils: PyTorch's ``torch.utils`` faces (``utils.data``)."""

from staticgrad.utils import data

__all__ = ["data"]
