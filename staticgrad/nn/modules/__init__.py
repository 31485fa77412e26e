"""``torch.nn.modules``: PyTorch's module paths for the layer classes (``torch.nn.modules.linear.Linear``
is ``torch.nn.Linear``), which scripts name when they allowlist classes for a weights-only ``load``."""

from staticgrad.nn.modules import (
    activation as activation,
)
from staticgrad.nn.modules import (
    batchnorm as batchnorm,
)
from staticgrad.nn.modules import (
    container as container,
)
from staticgrad.nn.modules import (
    conv as conv,
)
from staticgrad.nn.modules import (
    distance as distance,
)
from staticgrad.nn.modules import (
    dropout as dropout,
)
from staticgrad.nn.modules import (
    flatten as flatten,
)
from staticgrad.nn.modules import (
    instancenorm as instancenorm,
)
from staticgrad.nn.modules import (
    linear as linear,
)
from staticgrad.nn.modules import (
    loss as loss,
)
from staticgrad.nn.modules import (
    module as module,
)
from staticgrad.nn.modules import (
    normalization as normalization,
)
from staticgrad.nn.modules import (
    padding as padding,
)
from staticgrad.nn.modules import (
    pooling as pooling,
)
from staticgrad.nn.modules import (
    rnn as rnn,
)
from staticgrad.nn.modules import (
    sparse as sparse,
)
from staticgrad.nn.modules import (
    transformer as transformer,
)
from staticgrad.nn.modules import (
    upsampling as upsampling,
)
from staticgrad.nn.modules.activation import *  # noqa: F403
from staticgrad.nn.modules.batchnorm import *  # noqa: F403
from staticgrad.nn.modules.container import *  # noqa: F403
from staticgrad.nn.modules.conv import *  # noqa: F403
from staticgrad.nn.modules.distance import *  # noqa: F403
from staticgrad.nn.modules.dropout import *  # noqa: F403
from staticgrad.nn.modules.flatten import *  # noqa: F403
from staticgrad.nn.modules.instancenorm import *  # noqa: F403
from staticgrad.nn.modules.linear import *  # noqa: F403
from staticgrad.nn.modules.loss import *  # noqa: F403
from staticgrad.nn.modules.module import *  # noqa: F403
from staticgrad.nn.modules.normalization import *  # noqa: F403
from staticgrad.nn.modules.padding import *  # noqa: F403
from staticgrad.nn.modules.pooling import *  # noqa: F403
from staticgrad.nn.modules.rnn import *  # noqa: F403
from staticgrad.nn.modules.sparse import *  # noqa: F403
from staticgrad.nn.modules.transformer import *  # noqa: F403
from staticgrad.nn.modules.upsampling import *  # noqa: F403
