"""staticgrad.nn: modules, parameters, functional layers and initialisers."""

from staticgrad.nn import functional, init
from staticgrad.nn.layers import (Flatten, Identity, Linear, LogSoftmax, ModuleDict, ModuleList, MSELoss, ReLU,
                                  Sequential, Sigmoid, Softmax, Tanh)
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter

__all__ = ["Module", "Parameter", "Linear", "Identity", "Tanh", "ReLU", "Sigmoid", "Softmax", "LogSoftmax",
           "Flatten", "Sequential", "ModuleList", "ModuleDict", "MSELoss", "functional", "init"]
