"""conv2d's column loops (im2col, col2im) against NumPy's strided forms, over geometries where the
valid range of a window row is empty, partial or whole (padding wider than the kernel, strides past
the kernel, one-pixel planes), for every dtype width; and the three conv ops built on them against
float64 references and PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from numpy.lib.stride_tricks import sliding_window_view

import staticgrad as sg
from staticgrad.ops import OPS
from staticgrad.ops.conv import _col2im, _column_chunks, _geometry, pool_output_size

GEOMETRIES = [  # (n, c, h, w), (kh, kw), (sh, sw), (ph, pw)
    ((2, 3, 7, 9), (3, 3), (1, 1), (1, 1)),
    ((2, 3, 7, 9), (2, 3), (3, 2), (2, 1)),
    ((1, 2, 5, 4), (5, 1), (1, 3), (0, 2)),
    ((3, 1, 1, 1), (3, 3), (1, 1), (1, 1)),     # one pixel: every window mostly padding
    ((2, 2, 4, 6), (1, 1), (2, 3), (0, 0)),     # strides past the kernel: cells never read
    ((1, 2, 3, 3), (2, 2), (1, 1), (3, 4)),     # padding wider than the kernel: rows of zeros only
    ((2, 2, 6, 5), (4, 2), (2, 2), (1, 0)),
    ((0, 2, 5, 5), (3, 3), (1, 1), (1, 1)),     # empty batch
]


def _im2col(x, kernel, stride, padding, columns=None):
    """All of x's columns, through the chunked loop with chunks of ``len(columns)`` samples."""
    geometry = _geometry(x.shape, kernel, stride, padding)
    n, c, _, _, kh, kw, _, _, _, _, oh, ow = geometry
    if columns is None:
        columns = np.empty((n, c * kh * kw, oh * ow), x.dtype)
    whole = np.empty((n, c * kh * kw, oh * ow), x.dtype)
    for start, part in _column_chunks(x, geometry, columns):
        whole[start:start + len(part)] = part
    return whole


def _out_size(shape, kernel, stride, padding):
    return tuple(pool_output_size(*g) for g in zip(shape[2:], kernel, stride, padding))


def _reference_columns(x, kernel, stride, padding):
    n, c, h, w = x.shape
    (ph, pw), (sh, sw) = padding, stride
    padded = np.zeros((n, c, h + 2 * ph, w + 2 * pw), x.dtype)
    padded[:, :, ph:ph + h, pw:pw + w] = x
    windows = sliding_window_view(padded, kernel, axis=(-2, -1))[:, :, ::sh, ::sw]
    return np.ascontiguousarray(windows.transpose(0, 1, 4, 5, 2, 3))


def _reference_col2im(columns, shape, kernel, stride, padding):
    """The shifted adds of NumPy, one kernel cell after another, from zero."""
    n, c, h, w = shape
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    oh, ow = _out_size(shape, kernel, stride, padding)
    cells = columns.reshape(n, c, kh, kw, oh, ow)
    padded = np.zeros((n, c, h + 2 * ph, w + 2 * pw), columns.dtype)
    for i in range(kh):
        for j in range(kw):
            padded[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw] += cells[:, :, i, j]
    return padded[:, :, ph:ph + h, pw:pw + w]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int64])
@pytest.mark.parametrize("shape,kernel,stride,padding", GEOMETRIES)
def test_im2col_copies_every_window_cell_and_zeros_the_padding(shape, kernel, stride, padding, dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    x[..., ::2, :] = np.array(-0.0).astype(dtype) if x.dtype.kind == "f" else x[..., ::2, :]   # bits, not values
    columns = _im2col(x, kernel, stride, padding)
    expected = _reference_columns(x, kernel, stride, padding)
    assert columns.shape == (shape[0], shape[1] * kernel[0] * kernel[1], expected.shape[-2] * expected.shape[-1])
    assert columns.tobytes() == expected.tobytes()


@pytest.mark.parametrize("samples", [1, 2, 3])
def test_im2col_chunks_read_a_non_contiguous_input(samples):
    x = np.arange(5 * 3 * 8 * 10, dtype=np.float32).reshape(5, 3, 10, 8).transpose(0, 1, 3, 2)
    geometry = _geometry(x.shape, (3, 2), (2, 1), (1, 1))
    chunk = np.full((samples, 3 * 3 * 2, geometry[-2] * geometry[-1]), np.nan, np.float32)
    starts = []
    for start, part in _column_chunks(x, geometry, chunk):
        assert np.shares_memory(part, chunk) and len(part) == min(samples, 5 - start)
        starts.append(start)
    assert starts == list(range(0, 5, samples))
    expected = _reference_columns(x, (3, 2), (2, 1), (1, 1))
    np.testing.assert_array_equal(_im2col(x, (3, 2), (2, 1), (1, 1), chunk).reshape(expected.shape), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape,kernel,stride,padding", GEOMETRIES)
def test_col2im_adds_in_the_order_of_the_shifted_numpy_adds(shape, kernel, stride, padding, dtype):
    rng = np.random.default_rng(1)
    oh, ow = _out_size(shape, kernel, stride, padding)
    columns = rng.standard_normal((shape[0], shape[1] * kernel[0] * kernel[1], oh * ow)).astype(dtype)
    out = np.full(shape, 7, dtype)   # whatever out held is overwritten
    result = _col2im(columns, out, _geometry(shape, kernel, stride, padding))
    assert result is out
    assert out.tobytes() == np.ascontiguousarray(_reference_col2im(columns, shape, kernel, stride, padding)).tobytes()


@pytest.mark.parametrize("shape,kernel,stride,padding", GEOMETRIES[:-1])
def test_the_three_conv_ops_against_float64_references(shape, kernel, stride, padding):
    """conv2d, its input gradient and its weight gradient in float32 against the same sums done in
    float64 by einsum over the reference columns."""
    rng = np.random.default_rng(2)
    n, c = shape[:2]
    o = 4
    oh, ow = _out_size(shape, kernel, stride, padding)
    x = rng.standard_normal(shape).astype(np.float32)
    weight = rng.standard_normal((o, c, *kernel)).astype(np.float32)
    g = rng.standard_normal((n, o, oh, ow)).astype(np.float32)
    geometry = {"stride": stride, "padding": padding}
    columns = _reference_columns(x.astype(np.float64), kernel, stride, padding)
    y = OPS["conv2d"].forward(x, weight, **geometry)
    np.testing.assert_allclose(y, np.einsum("ncijyx,ocij->noyx", columns, weight.astype(np.float64)), rtol=1e-5,
                               atol=1e-5)
    grad_weight = OPS["conv2d_weight_grad"].forward(g, x, kernel_size=kernel, **geometry)
    np.testing.assert_allclose(grad_weight, np.einsum("ncijyx,noyx->ocij", columns, g.astype(np.float64)),
                               rtol=1e-5, atol=1e-4)
    cells = np.einsum("ocij,noyx->ncijyx", weight.astype(np.float64), g.astype(np.float64))
    grad_input = OPS["conv2d_input_grad"].forward(g, weight, input_size=shape[2:], **geometry)
    expected = _reference_col2im(cells.reshape(n, -1, oh * ow), shape, kernel, stride, padding)
    np.testing.assert_allclose(grad_input, expected, rtol=1e-5, atol=1e-5)


def test_input_grad_writes_a_transposed_out_and_matches_a_fresh_result():
    rng = np.random.default_rng(3)
    g = rng.standard_normal((2, 4, 5, 4)).astype(np.float32)
    weight = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    attrs = {"input_size": (5, 4), "stride": (1, 1), "padding": (1, 1)}
    fresh = OPS["conv2d_input_grad"].forward(g, weight, **attrs)
    out = np.empty((2, 3, 4, 5), np.float32).transpose(0, 1, 3, 2)
    assert OPS["conv2d_input_grad"].forward(g, weight, out=out, **attrs) is out
    assert np.array_equal(out, fresh)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 1e-4)])
@pytest.mark.parametrize("shape,kernel,stride,padding", GEOMETRIES)
def test_conv2d_values_and_gradients_match_torch(shape, kernel, stride, padding, dtype, tol):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype(dtype)
    weight = rng.standard_normal((3, shape[1], *kernel)).astype(dtype)
    bias = rng.standard_normal(3).astype(dtype)
    results = []
    for lib in (torch, sg):
        tensors = [lib.tensor(a, requires_grad=True) for a in (x, weight, bias)]
        y = lib.nn.functional.conv2d(*tensors, stride=stride, padding=padding)
        (y * lib.tensor(np.linspace(-1, 1, y.numel()).reshape(y.shape).astype(dtype))).sum().backward()
        results.append([y.detach().numpy()] + [t.grad.numpy() for t in tensors])
        if lib is sg:
            assert y.grad_fn.name() == "ConvolutionBackward0"
    for mine, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(mine, theirs, rtol=tol, atol=tol)


@pytest.mark.parametrize("budget", [1, 1 << 30])   # a sample per chunk, or the whole batch at once
def test_conv_ops_give_the_same_bits_in_chunks_and_into_an_out_over_their_input(monkeypatch, budget):
    """Chunks change no bits (each sample's matmul is its own call); an ``out`` over the memory of an
    input still being read (a planner may hand one) is written only when the input has been read."""
    import staticgrad.ops.conv as conv

    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 4, 6, 6)).astype(np.float32)
    weight = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    g = rng.standard_normal((5, 4, 6, 6)).astype(np.float32)
    geometry = {"stride": (1, 1), "padding": (1, 1)}
    calls = {"conv2d": lambda out=None, x=x: OPS["conv2d"].forward(x, weight, out=out, **geometry),
             "conv2d_input_grad": lambda out=None, g=g: OPS["conv2d_input_grad"].forward(
                 g, weight, out=out, input_size=(6, 6), **geometry)}
    expected = {name: call() for name, call in calls.items()}
    monkeypatch.setattr(conv, "_COLUMNS_BUDGET", budget)
    for name, call in calls.items():
        assert call().tobytes() == expected[name].tobytes(), name
        memory = np.concatenate([(x if name == "conv2d" else g), x[:1]])   # the input, then a sample more
        out = memory[1:]   # sample k of out is sample k + 1 of the input
        assert call(out=out, **{"x" if name == "conv2d" else "g": memory[:-1]}) is out
        assert out.tobytes() == expected[name].tobytes(), name
    # The weight gradient sums each chunk's samples, then adds the chunks' sums in order: into an
    # out over its input's second sample, the same bits as into fresh memory.
    weight_grad = OPS["conv2d_weight_grad"].forward(g, x, kernel_size=(3, 3), **geometry)
    np.testing.assert_allclose(weight_grad, np.einsum("ncijyx,noyx->ocij", _reference_columns(
        x.astype(np.float64), (3, 3), (1, 1), (1, 1)).reshape(5, 4, 3, 3, 6, 6), g.astype(np.float64)),
        rtol=1e-5, atol=1e-5)
    shared = x.copy()
    out = shared[1].reshape(-1)[:weight_grad.size].reshape(weight_grad.shape)   # over the second sample
    assert OPS["conv2d_weight_grad"].forward(g, shared, out=out, kernel_size=(3, 3), **geometry) is out
    assert out.tobytes() == weight_grad.tobytes()
