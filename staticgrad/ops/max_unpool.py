"""max_unpool3d (node ``MaxUnpool3DBackward0``): each value written at its flat index in its
(D, H, W) output volume, zeros elsewhere; the backward gathers the gradient at the same indices.
(max_unpool1d is PyTorch's composition over max_unpool2d, in staticgrad.nn.max_unpool.)"""

from __future__ import annotations

import math

import numpy as np

from staticgrad.ops.registry import OpDef, Save, register
from staticgrad.ops.shape import reshape_back


def _max_unpool3d(values, indices, out=None, output_size=(1, 1, 1)):
    lead = values.shape[:-3]
    planes = math.prod(lead)
    flat_values = np.reshape(values, (planes, -1))
    flat_indices = np.reshape(indices, (planes, -1))
    volume = math.prod(output_size)
    bad = (flat_indices < 0) | (flat_indices >= volume)  # PyTorch reports the last one it meets
    if bad.any():
        raise RuntimeError(f"Found an invalid max index: {int(flat_indices[bad][-1])} (output volumes are of size "
                           f"{'x'.join(str(n) for n in output_size)})")
    result = np.zeros((planes, volume), values.dtype)
    np.put_along_axis(result, flat_indices, flat_values, axis=1)
    result = result.reshape(*lead, *output_size)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _max_unpool3d_formula(F, g, s, at, need):
    # the adjoint of the scatter: the gradient gathered at the indices, per volume
    indices = s["indices"]
    lead = tuple(indices.shape[:-3])
    flat = reshape_back(F, g, lead + (math.prod(g.shape[-3:]),))
    picked = F.gather(flat, F.view(indices, shape=lead + (math.prod(indices.shape[-3:]),)), dim=len(lead))
    return F.view(picked, shape=tuple(indices.shape)), None


register(OpDef("max_unpool3d", _max_unpool3d, "other", "MaxUnpool3DBackward0", _max_unpool3d_formula,
               (Save("indices", 1), Save("output_size", "attr:output_size", freed=False)), "same", grad_inputs=(0,)))
