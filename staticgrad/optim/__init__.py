"""staticgrad.optim: optimizers with PyTorch's param_groups and update rules."""

from staticgrad.optim import lr_scheduler
from staticgrad.optim.adam import Adam, AdamW
from staticgrad.optim.adam_family import Adamax, NAdam, RAdam
from staticgrad.optim.adaptive import Adadelta, Adagrad, RMSprop
from staticgrad.optim.optimizer import Optimizer
from staticgrad.optim.sgd import SGD

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "NAdam", "Optimizer", "RAdam", "RMSprop",
           "lr_scheduler"]
