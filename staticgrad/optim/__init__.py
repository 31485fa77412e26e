"""staticgrad.optim: optimizers with PyTorch's param_groups and update rules."""

from staticgrad.optim import lr_scheduler
from staticgrad.optim.adam import Adam, AdamW
from staticgrad.optim.adaptive import Adadelta, Adagrad, RMSprop
from staticgrad.optim.optimizer import Optimizer
from staticgrad.optim.sgd import SGD

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
