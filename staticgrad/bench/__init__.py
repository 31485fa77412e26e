"""``staticgrad bench``: eager vs replay (vs PyTorch) on the tanh-MLP training step."""
