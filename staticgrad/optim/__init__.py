"""staticgrad.optim: optimizers with PyTorch's param_groups and update rules."""

from staticgrad.optim import lr_scheduler
from staticgrad.optim.adam import Adam, AdamW
from staticgrad.optim.optimizer import Optimizer
from staticgrad.optim.sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "lr_scheduler"]
