import numpy as np
import pytest

import staticgrad


@pytest.fixture(autouse=True)
def _seeded():
    staticgrad.manual_seed(0)
    np.random.seed(0)
    yield


# Every compile in the suite also runs the passes concretely and checks that the shape-generic
# result (computed once per structure on symbolic dims, then filled in) is the same.
from staticgrad.compiler import generic  # noqa: E402

generic.CROSS_CHECK = True
