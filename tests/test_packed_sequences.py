"""torch.nn.utils.rnn (PackedSequence, pack_padded_sequence, pad_packed_sequence, pack_sequence,
pad_sequence, unpad_sequence, unpack_sequence) and nn.RNN / GRU / LSTM on a PackedSequence, against
PyTorch: values, gradients, final hidden states at each sequence's own last step, node names,
errors; finite differences; a compiled training step on packed batches replays eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch
from tests.test_rnn import check_module, randn


def U(lib):
    return lib.nn.utils.rnn


def _lengths(lib, lengths, kind):
    if kind == "list":
        return list(lengths)
    return lib.tensor(lengths, dtype=lib.int32 if kind == "int32" else lib.int64)


def _packed_round_trip(lengths, batch_first, enforce_sorted, kind="tensor", total_length=None):
    def run(lib, x):
        packed = U(lib).pack_padded_sequence(x, _lengths(lib, lengths, kind), batch_first=batch_first,
                                             enforce_sorted=enforce_sorted)
        padded, out_lengths = U(lib).pad_packed_sequence(packed, batch_first=batch_first, padding_value=-1.5,
                                                         total_length=total_length)
        return packed.data, padded * 2, out_lengths.double()
    return run


ROUND_TRIPS = [
    ("sorted", [5, 3, 2], False, True, "tensor", None),
    ("sorted_list", [5, 5, 1], False, True, "list", None),
    ("unsorted", [2, 5, 3], False, False, "tensor", None),
    ("unsorted_ties", [3, 5, 3, 5, 1], False, False, "int32", None),
    ("batch_first_unsorted", [2, 4, 3], True, False, "list", 6),
    ("shorter_than_input", [3, 2, 1], False, True, "tensor", None),
]


@pytest.mark.parametrize("case", ROUND_TRIPS, ids=[c[0] for c in ROUND_TRIPS])
def test_pack_and_pad_match_torch(case):
    _, lengths, batch_first, enforce_sorted, kind, total = case
    shape = (len(lengths), 5, 3) if batch_first else (5, len(lengths), 3)
    run = _packed_round_trip(lengths, batch_first, enforce_sorted, kind, total)
    array = randn(*shape)
    compare(run, [array], atol=1e-12, rtol=1e-12, double=True)
    compare(run, [array.astype(np.float32)], atol=1e-6, rtol=1e-6)
    finite_difference_check(lambda x: run(sg, x)[1], [array])


def test_packed_sequence_fields_and_node_names_match_torch():
    results = []
    for lib in (torch, sg):
        x = lib.tensor(randn(5, 3, 2), requires_grad=True)
        packed = U(lib).pack_padded_sequence(x, lib.tensor([2, 5, 3]), enforce_sorted=False)
        padded, lengths = U(lib).pad_packed_sequence(packed)
        names = [type(t.grad_fn).__name__ if lib is torch else t.grad_fn.name() for t in (packed.data, padded)]
        fields = [packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices, lengths]
        results.append((names, [f.numpy().tolist() for f in fields], [str(f.dtype).split(".")[-1] for f in fields],
                        type(packed)._fields, isinstance(packed, tuple)))
    assert results[0] == results[1]
    assert results[1][0] == ["PackPaddedSequenceBackward0", "IndexSelectBackward0"]


def test_packed_sequence_methods_and_construction():
    for lib in (torch, sg):
        packed = U(lib).pack_sequence([lib.randn(3, 2), lib.randn(2, 2)])
        assert packed.double().data.dtype == lib.float64 and packed.to(lib.float64).data.dtype == lib.float64
        assert packed.float() is packed or packed.float().data.dtype == lib.float32
        assert not packed.is_cuda and not packed.is_pinned()
        again = U(lib).PackedSequence(packed.data, packed.batch_sizes)
        assert again.sorted_indices is None and again.unsorted_indices is None
        pair = U(lib).PackedSequence((packed.data, packed.batch_sizes))
        assert pair.batch_sizes.tolist() == [2, 2, 1]
        order = U(lib).PackedSequence(packed.data, packed.batch_sizes, lib.tensor([1, 0]))
        assert order.unsorted_indices.tolist() == [1, 0]
        assert U(lib).invert_permutation(lib.tensor([2, 0, 1])).tolist() == [1, 2, 0]


def test_sequence_lists_match_torch():
    arrays = [randn(4, 2), randn(1, 2, seed=1), randn(3, 2, seed=2)]

    def run(lib, a, b, c):
        packed = U(lib).pack_sequence([a, b, c], enforce_sorted=False)
        unpacked = U(lib).unpack_sequence(packed)
        padded = U(lib).pad_sequence([a, b, c], batch_first=True, padding_side="left")
        unpadded = U(lib).unpad_sequence(padded.flip(1), lib.tensor([4, 1, 3]), batch_first=True)
        return tuple(unpacked) + tuple(unpadded) + (packed.data,)
    compare(run, arrays, atol=1e-12, rtol=1e-12)


def test_unpad_sequence_time_major_matches_torch():
    def run(lib, x):
        return tuple(U(lib).unpad_sequence(x * 1.0, lib.tensor([2, 4, 1])))
    compare(run, [randn(4, 3, 2)], atol=1e-12, rtol=1e-12)
    same_error(lambda lib: U(lib).unpad_sequence(lib.zeros(4, 3, requires_grad=True), lib.tensor([2, 4, 1])))


ERRORS = [
    ("unsorted", lambda lib: U(lib).pack_padded_sequence(lib.zeros(5, 3, 2), [2, 3, 5])),
    ("zero_length", lambda lib: U(lib).pack_padded_sequence(lib.zeros(5, 3, 2), [5, 3, 0])),
    ("zero_length_unsorted", lambda lib: U(lib).pack_padded_sequence(lib.zeros(5, 3, 2), [0, 3, 2],
                                                                      enforce_sorted=False)),
    ("batch_size", lambda lib: U(lib).pack_padded_sequence(lib.zeros(5, 3, 2), [5, 3])),
    ("lengths_2d", lambda lib: U(lib).pack_padded_sequence(lib.zeros(5, 3, 2), [[5, 3, 2]])),
    ("total_length", lambda lib: U(lib).pad_packed_sequence(
        U(lib).pack_padded_sequence(lib.zeros(5, 3, 2), [5, 3, 2]), total_length=3)),
    ("padding_side", lambda lib: U(lib).pad_sequence([lib.zeros(2)], padding_side="middle")),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_errors_match_torch(case):
    same_error(case[1])


# Lengths beyond the padded input's steps: PyTorch packs what steps there are (its slices stop at the
# input's end, so nothing is read from outside it), leaving data with fewer rows than batch_sizes add up
# to; its backward, pad_packed_sequence and the recurrent layers then refuse. staticgrad does the same,
# with the same errors (nothing it produces reads past an array either).
BEYOND = [("longest", [4, 2], {}), ("all", [5, 3], {}), ("equal", [4, 4], {}),
          ("unsorted", [2, 4], {"enforce_sorted": False}), ("batch_first", [4, 2], {"batch_first": True})]


def _pack_beyond(lib, lengths, options, requires_grad=False):
    x = lib.arange(12.0).reshape(3, 2, 2).requires_grad_(requires_grad)
    if options.get("batch_first"):
        x = x.transpose(0, 1)
    return U(lib).pack_padded_sequence(x, lib.tensor(lengths), **options)


@pytest.mark.parametrize("name,lengths,options", BEYOND, ids=[c[0] for c in BEYOND])
def test_lengths_beyond_the_input_pack_as_torch_does(name, lengths, options):
    packed = [_pack_beyond(lib, lengths, options, requires_grad=True) for lib in (torch, sg)]
    np.testing.assert_array_equal(packed[1].data.detach().numpy(), packed[0].data.detach().numpy())
    np.testing.assert_array_equal(packed[1].batch_sizes.numpy(), packed[0].batch_sizes.numpy())
    assert packed[1].data.grad_fn.name() == packed[0].data.grad_fn.name() == "PackPaddedSequenceBackward0"
    same_error(lambda lib: _pack_beyond(lib, lengths, options, requires_grad=True).data.sum().backward())
    same_error(lambda lib: U(lib).pad_packed_sequence(_pack_beyond(lib, lengths, options)))
    for kind in ("LSTM", "GRU", "RNN"):
        same_error(lambda lib, kind=kind: getattr(lib.nn, kind)(2, 3)(_pack_beyond(lib, lengths, options)))


HAND_MADE = [(5, [2, 2, 1, 1]), (6, [2, 2, 2, 2]), (4, [2, 2, 2]), (7, [2, 2, 2]), (8, [2, 2, 2])]


@pytest.mark.parametrize("rows,batch_sizes", HAND_MADE, ids=[f"{r}_rows_{len(b)}_steps" for r, b in HAND_MADE])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN", "pad"])
def test_packed_data_and_batch_sizes_that_disagree(kind, rows, batch_sizes):
    """A PackedSequence made by hand with too few rows (or too many: only LSTM's whole-batch view refuses)."""
    def run(lib):
        packed = U(lib).PackedSequence(lib.arange(rows * 2.0).reshape(rows, 2), lib.tensor(batch_sizes))
        if kind == "pad":
            return U(lib).pad_packed_sequence(packed)[0]
        lib.manual_seed(0)
        return getattr(lib.nn, kind)(2, 3, num_layers=2, bidirectional=True)(packed)[0].data
    try:
        expected = run(torch)
    except RuntimeError:
        same_error(run)
        return
    assert tuple(run(sg).shape) == tuple(expected.shape)


# ---- recurrent layers on packed batches -----------------------------------------------------------

def _on_packed(lengths, enforce_sorted=False, batch_first=False, with_hidden=False):
    def call(module, x, *hidden):
        lib = torch if isinstance(x, torch.Tensor) else sg
        packed = U(lib).pack_padded_sequence(x, lib.tensor(lengths), batch_first=batch_first,
                                             enforce_sorted=enforce_sorted)
        if with_hidden:
            out, h = module(packed, hidden[0] if len(hidden) == 1 else tuple(hidden))
        else:
            out, h = module(packed)
        padded, _ = U(lib).pad_packed_sequence(out, batch_first=batch_first)
        return (padded, out.data, h)
    return call


LAYERS = [
    ("RNN", lambda lib: lib.nn.RNN(3, 4), _on_packed([2, 5, 3]), [randn(5, 3, 3)]),
    ("RNN_relu_2_layers_sorted", lambda lib: lib.nn.RNN(3, 4, 2, nonlinearity="relu"),
     _on_packed([5, 3, 3, 1], enforce_sorted=True), [randn(5, 4, 3)]),
    ("GRU_bidirectional_hidden", lambda lib: lib.nn.GRU(3, 4, num_layers=2, bidirectional=True),
     _on_packed([3, 5, 1], with_hidden=True), [randn(5, 3, 3), randn(4, 3, 4)]),
    ("GRU_batch_first_no_bias", lambda lib: lib.nn.GRU(3, 4, bias=False, batch_first=True),
     _on_packed([4, 2, 5], batch_first=True), [randn(3, 5, 3)]),
    ("LSTM", lambda lib: lib.nn.LSTM(3, 4), _on_packed([2, 5, 3]), [randn(5, 3, 3)]),
    ("LSTM_bidirectional_2_layers_hidden", lambda lib: lib.nn.LSTM(3, 4, num_layers=2, bidirectional=True),
     _on_packed([4, 1, 4, 2], with_hidden=True), [randn(4, 4, 3), randn(4, 4, 4), randn(4, 4, 4, seed=1)]),
    ("LSTM_proj_bidirectional", lambda lib: lib.nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2),
     _on_packed([3, 5, 2], with_hidden=True), [randn(5, 3, 3), randn(4, 3, 2), randn(4, 3, 5)]),
    ("LSTM_sorted_batch_first_no_bias", lambda lib: lib.nn.LSTM(3, 4, bias=False, batch_first=True),
     _on_packed([5, 2, 2], enforce_sorted=True, batch_first=True), [randn(3, 5, 3)]),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
def test_recurrent_layers_on_packed_match_torch(case, dtype):
    _, build, call, arrays = case
    torch.manual_seed(0)
    check_module(build(torch), build(sg), arrays, call, dtype)


def test_final_hidden_is_each_sequence_at_its_own_last_step():
    sg.manual_seed(0)
    gru = sg.nn.GRU(2, 3).double()
    x = sg.tensor(randn(6, 3, 2))
    _, h = gru(U(sg).pack_padded_sequence(x, [2, 6, 4], enforce_sorted=False))
    for row, length in enumerate([2, 6, 4]):
        _, alone = gru(x[:length, row:row + 1])
        np.testing.assert_allclose(h[:, row].detach().numpy(), alone[:, 0].detach().numpy(), rtol=1e-12, atol=1e-14)


def test_node_names_of_packed_outputs_match_torch():
    names = []
    for lib in (torch, sg):
        lib.manual_seed(0)
        x = lib.randn(5, 3, 2, requires_grad=True)
        row = []
        for module in (lib.nn.LSTM(2, 4, bidirectional=True), lib.nn.GRU(2, 4), lib.nn.RNN(2, 4)):
            out, h = module(U(lib).pack_padded_sequence(x, lib.tensor([2, 5, 3]), enforce_sorted=False))
            hs = h if isinstance(h, tuple) else (h,)
            row += [t.grad_fn.name() if lib is sg else type(t.grad_fn).__name__ for t in (out.data,) + hs]
            _sorted_out, sorted_h = module(U(lib).pack_padded_sequence(x, [5, 3, 2]))
            first = sorted_h[0] if isinstance(sorted_h, tuple) else sorted_h
            row.append(first.grad_fn.name() if lib is sg else type(first.grad_fn).__name__)
        names.append(row)
    assert names[0] == names[1]


def test_packed_input_errors_match_torch():
    def wrong_hidden(lib):
        packed = U(lib).pack_padded_sequence(lib.zeros(5, 3, 2), [5, 3, 2])
        lib.nn.GRU(2, 4)(packed, lib.zeros(1, 2, 4))

    def wrong_features(lib):
        packed = U(lib).pack_padded_sequence(lib.zeros(5, 3, 3), [5, 3, 2])
        lib.nn.LSTM(2, 4)(packed)

    same_error(wrong_hidden)
    for lib in (torch, sg):  # PyTorch's message comes from its matmul; staticgrad names the input size
        with pytest.raises(RuntimeError):
            wrong_features(lib)


def test_compiled_training_step_on_packed_batches_replays_eager():
    def make():
        sg.manual_seed(0)
        model = sg.nn.ModuleDict({"lstm": sg.nn.LSTM(3, 5, bidirectional=True), "head": sg.nn.Linear(10, 1)})
        opt = sg.optim.Adam(model.parameters(), lr=0.01)

        def step(x):
            opt.zero_grad()
            lengths = sg.tensor([2, 4, 3])  # a constant: the plan is for these lengths
            out, (h, _c) = model["lstm"](U(sg).pack_padded_sequence(x, lengths, enforce_sorted=False))
            padded, _ = U(sg).pad_packed_sequence(out)
            loss = model["head"](padded).pow(2).mean() + h.pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        return model, step

    (m_eager, eager), (m_comp, compiled) = make(), make()
    compiled = sg.compile(compiled)
    rng = np.random.default_rng(3)
    for _ in range(4):
        x = sg.tensor(rng.standard_normal((4, 3, 3)).astype(np.float32))
        np.testing.assert_array_equal(compiled(x).detach().numpy(), eager(x).detach().numpy())
    assert compiled.stats.replays >= 2
    for (name, pe), pc in zip(m_eager.named_parameters(), m_comp.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy(), err_msg=name)


def test_compiled_function_cannot_take_lengths_as_an_input():
    @sg.compile
    def pack(x, lengths):
        return U(sg).pack_padded_sequence(x, lengths).data * 2

    with pytest.raises(sg.errors.TraceError, match="lengths"):
        pack(sg.randn(4, 2, 3), sg.tensor([4, 2]))
