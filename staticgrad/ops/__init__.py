"""THE op table: one record per op, read by eager dispatch, autograd, the tracer and codegen.

Each ``OpDef`` holds an op's NumPy forward (``forward(*arrays, out=None, **attrs)``), its
dtype rule, what its backward needs saved (only what the formula uses), the backward formula
written with staticgrad ops (``backward(F, grad, saved, attrs, needs)``, where ``F`` calls any
op in this table on tensors, so the same formula serves eager backward, ``create_graph`` and
tracing), and for elementwise ops a scalar expression the fusion code generator can inline.

A scalar expression is exact or absent: it must perform the IEEE operations the NumPy forward
performs, in the same order, so fused replay equals eager bit for bit; ops without one (tanh,
exp, log: NumPy's SIMD loops differ from libm in the last bit and run ~20x faster) stay NumPy calls.

A leaf: imports only NumPy (and its own submodules); ``loops``, the Numba loops of the ops
NumPy has no fast loop for, loads Numba on the first call of such an op (see ``jit_loops()``).
"""

from staticgrad.ops import (  # noqa: F401  (fill OPS)
                                     batch_norm,
                                     collective,
                                     conv,
                                     conv_more,
                                     elementwise,
                                     factory,
                                     fused,
                                     linalg,
                                     loss,
                                     loss_more,
                                     movement,
                                     nn_ops,
                                     pooling,
                                     reductions,
                                     scalar_chains,
                                     shape,
)
from staticgrad.ops.registry import (
                                     DTYPE_RULES,
                                     KINDS,
                                     OPS,
                                     OpDef,
                                     Save,
                                     amend,
                                     as_array,
                                     jit_loops,
                                     lit,
                                     register,
                                     shape_str,
                                     with_emit,
)

__all__ = ["DTYPE_RULES", "KINDS", "OPS", "OpDef", "Save", "amend", "as_array", "jit_loops", "lit", "register",
           "shape_str", "with_emit"]

# Op families added later, each in its own module.
from staticgrad.ops import (  # noqa: F401  (fill OPS)
    activations,
    activations_more,
    affine_grid,
    alpha_dropout_noise,
    arith_more,
    attention,
    bitwise,
    casts,
    checks,
    counting,
    ctc,
    distances,
    embedding_more,
    grid_sample,
    grid_sample_3d,
    grid_sample_3d_grad,
    grid_sample_grad,
    group_norm,
    linalg_decomp,
    linalg_lu,
    linalg_more,
    linalg_solvers,
    loss_margin,
    math_extra,
    math_more,
    math_ops,
    max_unpool,
    order_stats,
    packed_sequence,
    pooling_nd,
    random_fill,
    random_more,
    rnn_layer,
    scans,
    scatter,
    special_ops,
    statistics,
    vector_norm,
)
