"""TransformerDecoderLayer, TransformerDecoder and Transformer against PyTorch in float64 (modules
loaded from PyTorch's state_dicts): outputs and the gradients of inputs and every parameter, with
and without norm_first, masks, batch_first both ways; the causal-mask helper; errors; a compiled
training step through a small Transformer replaying eager bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import same_error
from tests.test_attention import PADDING, check, randn

torch = pytest.importorskip("torch")
# PyTorch deprecates a bool key_padding_mask beside a float attn_mask; staticgrad accepts both silently.
pytestmark = pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")

D, HEADS, FF = 8, 2, 16
TGT_PADDING = np.array([[False] * 4 + [True], [False] * 5])  # (batch 2, target length 5)
CAUSAL = np.triu(np.ones((5, 5), bool), 1)


def _quiet(build):
    """PyTorch warns that its Transformer encoder cannot use nested tensors; not what is tested."""
    def quiet(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            torch.manual_seed(0)
            return build(lib)
    return quiet


def decoder_layer(**kwargs):
    return _quiet(lambda lib: lib.nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0, **kwargs))


def transformer(**kwargs):
    return _quiet(lambda lib: lib.nn.Transformer(D, HEADS, 2, 2, FF, dropout=0.0, **kwargs))


def causal(lib, size):
    return lib.nn.Transformer.generate_square_subsequent_mask(size, dtype=lib.float64)


LAYER_CASES = [
    ("relu_no_masks", decoder_layer(), lambda lib, m, t, mem: m(t, mem), [randn(5, 2, 8), randn(6, 2, 8)]),
    ("gelu_norm_first_batch_first_causal", decoder_layer(activation="gelu", norm_first=True, batch_first=True),
     lambda lib, m, t, mem: m(t, mem, tgt_mask=causal(lib, 5), tgt_is_causal=True),
     [randn(2, 5, 8), randn(2, 6, 8)]),
    ("all_masks", decoder_layer(),
     lambda lib, m, t, mem, tmask, mmask, tpad, mpad: m(t, mem, tgt_mask=tmask, memory_mask=mmask.detach(),
                                                        tgt_key_padding_mask=tpad, memory_key_padding_mask=mpad),
     [randn(5, 2, 8), randn(6, 2, 8), CAUSAL, randn(5, 6), TGT_PADDING, PADDING]),
    ("norm_first_masks", decoder_layer(norm_first=True),
     lambda lib, m, t, mem, tpad, mpad: m(t, mem, tgt_mask=causal(lib, 5), tgt_key_padding_mask=tpad,
                                          memory_key_padding_mask=mpad),
     [randn(5, 2, 8), randn(6, 2, 8), TGT_PADDING, PADDING]),
    ("callable_activation_no_bias_eps",
     _quiet(lambda lib: lib.nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0, activation=lib.tanh, bias=False,
                                                       layer_norm_eps=1e-3)),
     lambda lib, m, t, mem: m(t, mem), [randn(5, 2, 8), randn(6, 2, 8)]),
    ("unbatched", decoder_layer(), lambda lib, m, t, mem: m(t, mem, tgt_mask=causal(lib, 5)),
     [randn(5, 8), randn(6, 8)]),
    ("decoder_two_layers_norm",
     _quiet(lambda lib: lib.nn.TransformerDecoder(decoder_layer()(lib), 2, norm=lib.nn.LayerNorm(D))),
     lambda lib, m, t, mem, mpad: m(t, mem, tgt_mask=causal(lib, 5), memory_key_padding_mask=mpad),
     [randn(5, 2, 8), randn(6, 2, 8), PADDING]),
    ("decoder_batch_first_no_norm",
     _quiet(lambda lib: lib.nn.TransformerDecoder(decoder_layer(batch_first=True)(lib), 2)),
     lambda lib, m, t, mem: m(t, mem, tgt_mask=causal(lib, 5), tgt_is_causal=True), [randn(2, 5, 8), randn(2, 6, 8)]),
]


@pytest.mark.parametrize("case", LAYER_CASES, ids=[c[0] for c in LAYER_CASES])
def test_decoder_matches_torch(case):
    _, build, call, arrays = case
    check(call, arrays, build(torch), build(sg))


TRANSFORMER_CASES = [
    ("plain", transformer(), lambda lib, m, s, t: m(s, t), [randn(6, 2, 8), randn(5, 2, 8)]),
    ("masks", transformer(),
     lambda lib, m, s, t, smask, spad, tpad: m(s, t, src_mask=smask, tgt_mask=causal(lib, 5), src_key_padding_mask=spad,
                                               tgt_key_padding_mask=tpad, memory_key_padding_mask=spad),
     [randn(6, 2, 8), randn(5, 2, 8), np.triu(np.ones((6, 6), bool), 2), PADDING, TGT_PADDING]),
    ("batch_first_norm_first_gelu", transformer(batch_first=True, norm_first=True, activation="gelu"),
     lambda lib, m, s, t, mmask: m(s, t, tgt_mask=causal(lib, 5), memory_mask=mmask.detach(), tgt_is_causal=True),
     [randn(2, 6, 8), randn(2, 5, 8), randn(5, 6)]),
    ("unbatched", transformer(), lambda lib, m, s, t: m(s, t, tgt_mask=causal(lib, 5)), [randn(6, 8), randn(5, 8)]),
]


@pytest.mark.parametrize("case", TRANSFORMER_CASES, ids=[c[0] for c in TRANSFORMER_CASES])
def test_transformer_matches_torch(case):
    _, build, call, arrays = case
    check(call, arrays, build(torch), build(sg))


def _word_language_model(lib):
    """The word-level language model of PyTorch's examples: a subclass of nn.Transformer whose
    ``decoder`` is replaced by a Linear head, run as an encoder under the causal mask helper."""
    class TransformerModel(lib.nn.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers,
                             dropout=0.0)
            self.input_emb = lib.nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = lib.nn.Linear(ninp, ntoken)

        def forward(self, src):
            mask = lib.nn.Transformer.generate_square_subsequent_mask(len(src)).to("cpu")  # float32
            src = self.input_emb(src) * self.ninp ** 0.5
            output = self.decoder(self.encoder(src, mask=mask))
            return lib.nn.functional.log_softmax(output, dim=-1)

    return _quiet(lambda lib: TransformerModel(11, D, HEADS, FF, 2))(lib)


def test_word_language_model_subclassing_transformer_matches_torch():
    t_model, s_model = _word_language_model(torch), _word_language_model(sg)
    assert list(s_model.state_dict()) == list(t_model.state_dict())
    tokens = np.random.default_rng(0).integers(0, 11, (7, 2))
    check(lambda lib, m, src: m(src), [tokens], t_model, s_model)


def test_transformer_in_eval_with_default_dropout_matches_torch():
    build = _quiet(lambda lib: lib.nn.Transformer(D, HEADS, 1, 1, FF).eval())  # dropout 0.1, off in eval
    check(lambda lib, m, s, t: m(s, t, tgt_mask=causal(lib, 5)), [randn(6, 2, 8), randn(5, 2, 8)],
          build(torch), build(sg))


@pytest.mark.parametrize("build", [transformer(), transformer(bias=False, norm_first=True),
                                   decoder_layer(batch_first=True)])
def test_parameter_names_and_state_dict_keys_match_torch(build):
    t_module, s_module = build(torch), build(sg)
    assert [(n, tuple(p.shape)) for n, p in s_module.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in t_module.named_parameters()]
    assert list(s_module.state_dict()) == list(t_module.state_dict())


@pytest.mark.parametrize("build", [decoder_layer(), decoder_layer(norm_first=True), transformer(),
                                   transformer(norm_first=True)])
def test_output_node_names_match_torch(build):
    outputs = [build(lib)(lib.ones(3, 2, D, requires_grad=True), lib.ones(4, 2, D)) for lib in (torch, sg)]
    assert outputs[1].grad_fn.name() == outputs[0].grad_fn.name()


def test_transformer_initialises_weights_xavier_uniform_and_keeps_its_settings():
    sg.manual_seed(0)
    model = sg.nn.Transformer(D, HEADS, 1, 1, FF, batch_first=True)
    assert (model.d_model, model.nhead, model.batch_first) == (D, HEADS, True)
    for name, p in model.named_parameters():
        values = p.detach().numpy()
        if p.dim() > 1:  # xavier_uniform_: U(-a, a), a = sqrt(6 / (fan_in + fan_out))
            bound = np.sqrt(6.0 / (values.shape[0] + values.shape[1]))
            assert np.abs(values).max() <= bound and np.abs(values).max() > 0.5 * bound, name
        elif "norm" in name and name.endswith("weight"):
            np.testing.assert_array_equal(values, 1.0, err_msg=name)
        else:  # biases stay as their modules set them (zero in attention and LayerNorm)
            assert "bias" in name, name
    layers = [model.encoder.layers[0].linear1.weight, model.decoder.layers[0].linear1.weight]
    assert not np.array_equal(layers[0].detach().numpy(), layers[1].detach().numpy())


def test_custom_encoder_and_decoder_are_used():
    encoder, decoder = _Double(), _TakeMemory()
    model = sg.nn.Transformer(D, HEADS, custom_encoder=encoder, custom_decoder=decoder)
    assert model.encoder is encoder and model.decoder is decoder
    src = sg.randn(3, 2, D)
    np.testing.assert_array_equal(model(src, sg.randn(4, 2, D)).detach().numpy(), encoder(src).detach().numpy())


class _Double(sg.nn.Module):
    def forward(self, src, **masks):
        return src * 2


class _TakeMemory(sg.nn.Module):
    def forward(self, tgt, memory, **masks):
        return memory


def test_decoder_layers_are_independent_copies():
    layer = sg.nn.TransformerDecoderLayer(D, HEADS, FF)
    decoder = sg.nn.TransformerDecoder(layer, 3)
    assert decoder.num_layers == 3 and len(decoder.layers) == 3
    weights = {id(m.linear1.weight) for m in decoder.layers} | {id(layer.linear1.weight)}
    assert len(weights) == 4
    np.testing.assert_array_equal(decoder.layers[2].linear1.weight.detach().numpy(),
                                  layer.linear1.weight.detach().numpy())


# ---- generate_square_subsequent_mask ---------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 4])
@pytest.mark.parametrize("dtype", [None, "float64", "float16", "bool"])
def test_square_subsequent_mask_matches_torch(size, dtype):
    t = torch.nn.Transformer.generate_square_subsequent_mask(size, dtype=dtype and getattr(torch, dtype))
    s = sg.nn.Transformer.generate_square_subsequent_mask(size, dtype=dtype and getattr(sg, dtype))
    assert str(s.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(s.shape) == tuple(t.shape) and not s.requires_grad
    np.testing.assert_array_equal(s.numpy(), t.numpy())


def test_square_subsequent_mask_has_the_default_dtype_and_takes_a_device():
    mask = sg.nn.Transformer.generate_square_subsequent_mask(3, device="cpu")
    assert mask.dtype == sg.get_default_dtype() == sg.float32 and mask.device == sg.device("cpu")


# ---- errors --------------------------------------------------------------------------------------------

def _model(lib, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return lib.nn.Transformer(D, HEADS, 1, 1, FF, **kwargs)


ERRORS = {
    "batch_mismatch": lambda lib: _model(lib)(lib.zeros(3, 2, D), lib.zeros(4, 3, D)),
    "batch_mismatch_batch_first": lambda lib: _model(lib, batch_first=True)(lib.zeros(2, 3, D), lib.zeros(3, 3, D)),
    "feature_mismatch": lambda lib: _model(lib)(lib.zeros(3, 2, D), lib.zeros(4, 2, D + 1)),
    "feature_mismatch_unbatched": lambda lib: _model(lib)(lib.zeros(3, D + 1), lib.zeros(4, D)),
    "heads_do_not_divide": lambda lib: lib.nn.TransformerDecoderLayer(D, 3),
    "activation": lambda lib: lib.nn.TransformerDecoderLayer(D, HEADS, activation="tanh"),
    "transformer_activation": lambda lib: lib.nn.Transformer(D, HEADS, 1, 1, activation="swish"),
    "src_causal_hint_without_mask": lambda lib: _model(lib)(lib.zeros(3, 2, D), lib.zeros(4, 2, D),
                                                            src_is_causal=True),
    "tgt_causal_hint_without_mask": lambda lib: _model(lib)(lib.zeros(3, 2, D), lib.zeros(4, 2, D),
                                                            tgt_is_causal=True),
    "causal_hint_without_mask": lambda lib: lib.nn.TransformerDecoderLayer(D, HEADS, FF)(
        lib.zeros(3, 2, D), lib.zeros(4, 2, D), tgt_is_causal=True),
    "memory_mask_shape": lambda lib: lib.nn.TransformerDecoderLayer(D, HEADS, FF)(
        lib.zeros(3, 2, D), lib.zeros(4, 2, D), memory_mask=lib.zeros(3, 3)),
    "mask_negative_size": lambda lib: lib.nn.Transformer.generate_square_subsequent_mask(-1),
    "mask_float_size": lambda lib: lib.nn.Transformer.generate_square_subsequent_mask(2.5),
    "mask_int64": lambda lib: lib.nn.Transformer.generate_square_subsequent_mask(2, dtype=lib.int64),
    "mask_int32": lambda lib: lib.nn.Transformer.generate_square_subsequent_mask(2, dtype=lib.int32),
    "mask_uint8": lambda lib: lib.nn.Transformer.generate_square_subsequent_mask(2, dtype=lib.uint8),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_torch(name):
    same_error(ERRORS[name])


# ---- compiled training step ----------------------------------------------------------------------------

def _seq2seq(dropout: float):
    sg.manual_seed(0)
    return sg.nn.ModuleDict({
        "embed": sg.nn.Embedding(11, D),
        "transformer": sg.nn.Transformer(D, HEADS, 1, 2, FF, dropout=dropout, batch_first=True),
        "head": sg.nn.Linear(D, 11),
    }).to(sg.float64)


@pytest.mark.bitexact
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_compiled_transformer_training_step_replays_eager(dropout):
    def make():
        model = _seq2seq(dropout)
        opt = sg.optim.AdamW(model.parameters(), lr=0.01)

        def step(src, tgt, target, pad):
            opt.zero_grad()
            mask = sg.nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], dtype=sg.float64)
            out = model["transformer"](model["embed"](src), model["embed"](tgt), tgt_mask=mask,
                                       src_key_padding_mask=pad, memory_key_padding_mask=pad)
            loss = sg.nn.functional.cross_entropy(model["head"](out).reshape(-1, 11), target.reshape(-1))
            loss.backward()
            opt.step()
            return loss
        return model, step

    (m_eager, eager), (m_comp, compiled) = make(), make()
    compiled = sg.compile(compiled)
    rng = np.random.default_rng(3)
    pad = np.zeros((2, 6), bool)
    pad[0, -2:] = True
    batches = [(sg.tensor(rng.integers(0, 11, (2, 6))), sg.tensor(rng.integers(0, 11, (2, 5))),
                sg.tensor(rng.integers(0, 11, (2, 5))), sg.tensor(np.roll(pad, i, axis=0))) for i in range(4)]
    sg.manual_seed(7)
    eager_losses = [eager(*batch).item() for batch in batches]
    sg.manual_seed(7)
    compiled_losses = [compiled(*batch).item() for batch in batches]
    assert compiled.stats.replays >= 2
    assert compiled_losses == eager_losses
    for (name, pe), pc in zip(m_eager.named_parameters(), m_comp.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy(), err_msg=name)
