"""The PyTorch-level functions (``torch.functional``'s place): every public function of the eager
core's ``functions`` module, under this import path."""

from staticgrad._eager import functions as _functions

__all__ = sorted(name for name, value in vars(_functions).items()
                 if not name.startswith("_") and callable(value)
                 and getattr(value, "__module__", None) == _functions.__name__)
globals().update({name: getattr(_functions, name) for name in __all__})
