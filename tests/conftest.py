import numpy as np
import pytest

import staticgrad


@pytest.fixture(autouse=True)
def _seeded():
    staticgrad.manual_seed(0)
    np.random.seed(0)
    yield
