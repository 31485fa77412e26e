"""``torch.nn.modules.loss``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.ctc_loss import CTCLoss
from staticgrad.nn.layers import MSELoss
from staticgrad.nn.loss import CrossEntropyLoss, NLLLoss
from staticgrad.nn.loss_more import BCELoss, BCEWithLogitsLoss, HuberLoss, KLDivLoss, L1Loss, SmoothL1Loss
from staticgrad.nn.margin_losses import (
    CosineEmbeddingLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    MarginRankingLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)

__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "CTCLoss",
    "CosineEmbeddingLoss",
    "CrossEntropyLoss",
    "GaussianNLLLoss",
    "HingeEmbeddingLoss",
    "HuberLoss",
    "KLDivLoss",
    "L1Loss",
    "MSELoss",
    "MarginRankingLoss",
    "MultiLabelMarginLoss",
    "MultiLabelSoftMarginLoss",
    "MultiMarginLoss",
    "NLLLoss",
    "PoissonNLLLoss",
    "SmoothL1Loss",
    "SoftMarginLoss",
    "TripletMarginLoss",
    "TripletMarginWithDistanceLoss",
]
