"""``torch.nn.modules.loss``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.layers import MSELoss
from staticgrad.nn.loss import CrossEntropyLoss, NLLLoss
from staticgrad.nn.loss_more import BCELoss, BCEWithLogitsLoss, HuberLoss, KLDivLoss, L1Loss, SmoothL1Loss

__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "HuberLoss",
    "KLDivLoss",
    "L1Loss",
    "MSELoss",
    "NLLLoss",
    "SmoothL1Loss",
]
