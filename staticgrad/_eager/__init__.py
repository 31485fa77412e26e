"""The eager core: tensors, backward nodes, dispatch through the op table, the backward engine,
and the PyTorch-level functions, creation and indexing built on them.

Modules depend on each other in one direction: ``tensor`` and ``grad_mode`` (leaves), ``node``,
``dispatch``, ``engine``, ``arguments``, ``functions``, ``creation``, ``indexing``, ``printing``,
and last ``methods``, which installs the Tensor methods and operators that call them all.
"""
