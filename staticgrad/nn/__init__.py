"""staticgrad.nn: modules, parameters, functional layers and initialisers."""

from staticgrad.nn import functional, init, parallel, utils
from staticgrad.nn.activation import GELU
from staticgrad.nn.activations import (
    CELU,
    ELU,
    GLU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    Mish,
    ReLU6,
    SiLU,
    Softplus,
    Softsign,
)
from staticgrad.nn.activations_more import Hardshrink, PReLU, Softmax2d, Softmin, Softshrink, Tanhshrink, Threshold
from staticgrad.nn.alpha_dropout import AlphaDropout, FeatureAlphaDropout
from staticgrad.nn.attention import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer
from staticgrad.nn.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from staticgrad.nn.channel_dropout import Dropout1d, Dropout2d, Dropout3d
from staticgrad.nn.conv_more import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from staticgrad.nn.ctc_loss import CTCLoss
from staticgrad.nn.dropout import Dropout
from staticgrad.nn.group_norm import GroupNorm
from staticgrad.nn.instance_norm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from staticgrad.nn.layers import (
    Flatten,
    Identity,
    Linear,
    LogSoftmax,
    ModuleDict,
    ModuleList,
    MSELoss,
    ReLU,
    Sequential,
    Sigmoid,
    Softmax,
    Tanh,
    Unflatten,
)
from staticgrad.nn.layers_more import Bilinear, EmbeddingBag, RReLU
from staticgrad.nn.local_response_norm import LocalResponseNorm
from staticgrad.nn.loss import CrossEntropyLoss, NLLLoss
from staticgrad.nn.loss_more import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineSimilarity,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    SmoothL1Loss,
)
from staticgrad.nn.margin_losses import (
    CosineEmbeddingLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    MarginRankingLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    PairwiseDistance,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from staticgrad.nn.max_unpool import MaxUnpool1d, MaxUnpool3d
from staticgrad.nn.module import Module
from staticgrad.nn.normalization import LayerNorm
from staticgrad.nn.padding import (
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from staticgrad.nn.parameter import Parameter
from staticgrad.nn.parameter_containers import ParameterDict, ParameterList
from staticgrad.nn.pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
    MaxUnpool2d,
)
from staticgrad.nn.pooling_more import (
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool3d,
    ChannelShuffle,
    Fold,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool3d,
    PixelShuffle,
    PixelUnshuffle,
    Unfold,
)
from staticgrad.nn.recurrent_more import GRU, RNN, GRUCell, RNNCell
from staticgrad.nn.rms_norm import RMSNorm
from staticgrad.nn.rnn import LSTM, LSTMCell
from staticgrad.nn.sparse import Embedding
from staticgrad.nn.transformer_decoder import Transformer, TransformerDecoder, TransformerDecoderLayer
from staticgrad.nn.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = [
    "CELU",
    "ELU",
    "GELU",
    "GLU",
    "GRU",
    "LSTM",
    "RNN",
    "SELU",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AlphaDropout",
    "AvgPool1d",
    "AvgPool2d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "CosineSimilarity",
    "CrossEntropyLoss",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "Embedding",
    "FeatureAlphaDropout",
    "Flatten",
    "GRUCell",
    "GroupNorm",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "HuberLoss",
    "Identity",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "KLDivLoss",
    "L1Loss",
    "LSTMCell",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSigmoid",
    "LogSoftmax",
    "MSELoss",
    "MaxPool1d",
    "MaxPool2d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "Mish",
    "Module",
    "ModuleDict",
    "ModuleList",
    "MultiheadAttention",
    "NLLLoss",
    "PReLU",
    "Parameter",
    "ParameterDict",
    "ParameterList",
    "RMSNorm",
    "RNNCell",
    "ReLU",
    "ReLU6",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "SmoothL1Loss",
    "Softmax",
    "Softmax2d",
    "Softmin",
    "Softplus",
    "Softshrink",
    "Softsign",
    "Tanh",
    "Tanhshrink",
    "Threshold",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "Unflatten",
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
    "functional",
    "init",
    "modules",
    "parallel",
    "utils",
]

# PyTorch's module paths for the classes above (torch.nn.modules.linear.Linear is torch.nn.Linear).
from staticgrad.nn import modules

# The margin, embedding and likelihood losses (staticgrad.nn.margin_losses).
__all__ += [
    "CTCLoss",
    "CosineEmbeddingLoss",
    "GaussianNLLLoss",
    "HingeEmbeddingLoss",
    "MarginRankingLoss",
    "MultiLabelMarginLoss",
    "MultiLabelSoftMarginLoss",
    "MultiMarginLoss",
    "PairwiseDistance",
    "PoissonNLLLoss",
    "SoftMarginLoss",
    "TripletMarginLoss",
]
# More pooling and rearranging layers (staticgrad.nn.pooling_more).
__all__ += ["AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool3d", "Fold", "LPPool1d", "LPPool2d",
            "MaxPool3d", "PixelShuffle", "PixelUnshuffle", "Unfold"]
# More layers (staticgrad.nn.layers_more).
__all__ += ["Bilinear", "EmbeddingBag", "RReLU"]
# Rarer relatives of the layers above.
__all__ += ["AdaptiveMaxPool3d", "ChannelShuffle", "LPPool3d", "LocalResponseNorm", "TripletMarginWithDistanceLoss"]
