"""How fast are the ops NumPy has no fast loop for (GELU, max pooling, ReLU's backward, softmax,
log-softmax, layer norm), alone and inside the training steps that use them, against PyTorch?

    python benchmarks/ops_speed.py [--rounds 10] [--threads 1] [--only ops cnn lm]

Op rows time an op's forward function from the op table, the code eager dispatch and replay
both run, against PyTorch's aten op on the same float32 data. Step rows time a whole training
step: a CNN (two conv + ReLU + 2x2 max pool blocks, 1x28x28 inputs) and a small Transformer LM
(GELU MLPs), in staticgrad eager, staticgrad replay (``staticgrad.compile``) and PyTorch eager.
Figures are medians in ms over alternating blocks of calls (staticgrad.bench.measure). BLAS
and PyTorch run on ``--threads`` threads (default 1: on a small machine, a second library's
idle-spinning pool would otherwise slow the one being timed).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

if __name__ == "__main__":  # thread counts must be set before NumPy loads its BLAS
    _threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv[:-1] else "1"
    for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_name] = _threads

import numpy as np

import staticgrad as sg
from staticgrad.bench.families import LM_BATCH, LM_CONTEXT, LM_DIM, LM_HEADS, LM_LAYERS, LM_VOCAB, bench_model
from staticgrad.bench.measure import interleaved_medians
from staticgrad.bench.models import training_step
from staticgrad.bench.runner import machine_line
from staticgrad.ops import OPS


def op_rows(rng):
    """(label, staticgrad callable, torch callable or None) for each op at the steps' shapes."""
    import torch

    def arrays(*shape):
        a = rng.standard_normal(shape, dtype=np.float32)
        return a, torch.from_numpy(a.copy())

    rows = []
    x, tx = arrays(LM_BATCH, LM_CONTEXT, 4 * LM_DIM)
    g, tg = arrays(LM_BATCH, LM_CONTEXT, 4 * LM_DIM)
    shape = "x".join(map(str, x.shape))
    for form in ("none", "tanh"):
        rows.append((f"gelu {form} {shape}", lambda f=form, x=x: OPS["gelu"].forward(x, approximate=f),
                     lambda f=form, tx=tx: torch.nn.functional.gelu(tx, approximate=f)))
        rows.append((f"gelu_backward {form} {shape}",
                     lambda f=form, g=g, x=x: OPS["gelu_backward"].forward(g, x, approximate=f),
                     lambda f=form, tg=tg, tx=tx: torch.ops.aten.gelu_backward(tg, tx, approximate=f)))
    for n, c, h in ((32, 8, 28), (32, 16, 14), (128, 8, 28), (128, 16, 14)):
        x, tx = arrays(n, c, h, h)
        g, tg = arrays(n, c, h // 2, h // 2)
        geometry = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}
        indices = OPS["max_pool2d"].forward(x, **geometry)[1]
        t_indices = torch.ops.aten.max_pool2d_with_indices(tx, [2, 2], [2, 2])[1]
        shape = f"{n}x{c}x{h}x{h}"
        rows.append((f"max_pool2d k2 s2 {shape}",
                     lambda x=x, geometry=geometry: OPS["max_pool2d"].forward(x, **geometry),
                     lambda tx=tx: torch.ops.aten.max_pool2d_with_indices(tx, [2, 2], [2, 2])))
        rows.append((f"max_pool2d_backward {shape}",
                     lambda g=g, i=indices, h=h: OPS["max_pool2d_backward"].forward(g, i, input_size=(h, h)),
                     lambda tg=tg, tx=tx, ti=t_indices: torch.ops.aten.max_pool2d_with_indices_backward(
                         tg, tx, [2, 2], [2, 2], [0, 0], [1, 1], False, ti)))
    x, tx = arrays(32, 8, 28, 28)
    g, tg = arrays(32, 8, 28, 28)
    y, ty = np.maximum(x, 0), torch.relu(tx)
    rows.append(("threshold_backward 32x8x28x28", lambda g=g, y=y: OPS["threshold_backward"].forward(g, y, threshold=0),
                 lambda tg=tg, ty=ty: torch.ops.aten.threshold_backward(tg, ty, 0)))
    return rows + softmax_rows(arrays) + layer_norm_rows(arrays)


def softmax_rows(arrays):
    """softmax over the LM's causal attention scores (-inf above the diagonal) and a large shape;
    log_softmax over cross_entropy's logits (256 rows of the LM's vocabulary, of 128 classes, and a
    large shape); each with its backward."""
    import torch

    rows = []
    heads, steps = LM_HEADS, LM_CONTEXT
    for shape in ((LM_BATCH, heads, steps, steps), (16, 8, 128, 128)):
        x, tx = arrays(*shape)
        causal = np.triu(np.ones(shape[-2:], bool), 1)
        x[..., causal] = -np.inf
        tx[..., torch.from_numpy(causal)] = -math.inf
        g, tg = arrays(*shape)
        y, ty = OPS["softmax"].forward(x, dim=-1), torch._softmax(tx, -1, False)
        label = "x".join(map(str, shape))
        rows.append((f"softmax {label}", lambda x=x: OPS["softmax"].forward(x, dim=-1),
                     lambda tx=tx: torch._softmax(tx, -1, False)))
        rows.append((f"softmax_backward {label}", lambda g=g, y=y: OPS["softmax_backward"].forward(g, y, dim=-1),
                     lambda tg=tg, ty=ty: torch._softmax_backward_data(tg, ty, -1, torch.float32)))
    for shape in ((LM_BATCH * LM_CONTEXT, LM_DIM), (LM_BATCH * LM_CONTEXT, LM_VOCAB), (4096, 1024)):
        x, tx = arrays(*shape)
        g, tg = arrays(*shape)
        y, ty = OPS["log_softmax"].forward(x, dim=1), torch._log_softmax(tx, 1, False)
        label = "x".join(map(str, shape))
        rows.append((f"log_softmax {label}", lambda x=x: OPS["log_softmax"].forward(x, dim=1),
                     lambda tx=tx: torch._log_softmax(tx, 1, False)))
        rows.append((f"log_softmax_backward {label}",
                     lambda g=g, y=y: OPS["log_softmax_backward"].forward(g, y, dim=1),
                     lambda tg=tg, ty=ty: torch._log_softmax_backward_data(tg, ty, 1, torch.float32)))
    return rows


def layer_norm_rows(arrays):
    """layer_norm with weight and bias over the LM's features, and a large shape; and its backward."""
    import torch

    rows = []
    for shape in ((LM_BATCH, LM_CONTEXT, LM_DIM), (32, 128, 512)):
        x, tx = arrays(*shape)
        g, tg = arrays(*shape)
        w, tw = arrays(shape[-1])
        b, tb = arrays(shape[-1])
        features = (shape[-1],)
        _, mean, rstd = OPS["layer_norm_affine"].forward(x, w, b, normalized_shape=features, eps=1e-5)
        _, t_mean, t_rstd = torch.native_layer_norm(tx, list(features), tw, tb, 1e-5)
        label = "x".join(map(str, shape))
        rows.append((f"layer_norm affine {label}",
                     lambda x=x, w=w, b=b, f=features: OPS["layer_norm_affine"].forward(x, w, b, normalized_shape=f,
                                                                                        eps=1e-5),
                     lambda tx=tx, tw=tw, tb=tb, f=features: torch.native_layer_norm(tx, list(f), tw, tb, 1e-5)))
        rows.append((f"layer_norm_backward affine {label}",
                     lambda g=g, x=x, m=mean, r=rstd, w=w, f=features: OPS["layer_norm_backward_affine"].forward(
                         g, x, m, r, w, normalized_shape=f),
                     lambda tg=tg, tx=tx, m=t_mean, r=t_rstd, tw=tw, tb=tb, f=features:
                         torch.ops.aten.native_layer_norm_backward(tg, tx, list(f), m, r, tw, tb, [True, True, True])))
    return rows


# ---- the models, built alike in both libraries ----------------------------------------------------

def cnn(lib):
    return bench_model("cnn").model(lib)


def lm(lib):
    return bench_model("transformer").model(lib)


def lm_step(lib, model, opt):
    def step(idx, targets):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(idx).view(-1, LM_VOCAB), targets.view(-1))
        loss.backward()
        opt.step()
        return loss
    return step


def twins(build, step_of):
    """(staticgrad eager step, staticgrad compiled step, torch step), all from torch's initial weights."""
    import torch

    torch.manual_seed(0)
    t_model = build(torch)
    steps = []
    for _ in range(2):
        s_model = build(sg)
        s_model.load_state_dict({k: v.detach().numpy().copy() for k, v in t_model.state_dict().items()})
        steps.append(step_of(sg, s_model, sg.optim.SGD(s_model.parameters(), lr=0.01, momentum=0.9)))
    return steps[0], sg.compile(steps[1]), step_of(torch, t_model, torch.optim.SGD(t_model.parameters(), lr=0.01,
                                                                                     momentum=0.9))


def step_rows(rng, which):
    import torch

    rows = []
    if "cnn" in which:
        for batch in (32, 128):
            eager, compiled, t_step = twins(cnn, training_step)
            x = rng.standard_normal((batch, 1, 28, 28), dtype=np.float32)
            y = rng.standard_normal((batch, 10), dtype=np.float32)
            sx, sy, tx, ty = sg.tensor(x), sg.tensor(y), torch.tensor(x), torch.tensor(y)
            rows.append((f"CNN step, batch {batch}", lambda e=eager, a=sx, b=sy: e(a, b),
                         lambda c=compiled, a=sx, b=sy: c(a, b), lambda t=t_step, a=tx, b=ty: t(a, b)))
    if "lm" in which:
        eager, compiled, t_step = twins(lm, lm_step)
        idx = rng.integers(0, LM_VOCAB, (LM_BATCH, LM_CONTEXT))
        targets = rng.integers(0, LM_VOCAB, (LM_BATCH, LM_CONTEXT))
        si, st, ti, tt = sg.tensor(idx), sg.tensor(targets), torch.tensor(idx), torch.tensor(targets)
        rows.append((f"LM step, batch {LM_BATCH}x{LM_CONTEXT}, dim {LM_DIM}, {LM_LAYERS} GELU blocks",
                     lambda: eager(si, st), lambda: compiled(si, st), lambda: t_step(ti, tt)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="BLAS and PyTorch threads (default 1)")
    parser.add_argument("--only", nargs="+", choices=["ops", "cnn", "lm"], default=["ops", "cnn", "lm"])
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(machine_line(), f"- {args.threads} thread(s)")
    rng = np.random.default_rng(0)
    if "ops" in args.only:
        print(f"\n{'op (float32)':44} {'staticgrad':>11} {'PyTorch':>9}")
        for label, ours, theirs in op_rows(rng):
            ours(), theirs()  # compile and warm up
            times = interleaved_medians({"sg": ours, "torch": theirs}, steps=20 * args.rounds, block=20)
            print(f"{label:44} {times['sg'] * 1e3:9.3f}ms {times['torch'] * 1e3:7.3f}ms")
    rows = step_rows(rng, args.only)
    if rows:
        print(f"\n{'training step (float32, SGD)':52} {'eager':>9} {'replay':>9} {'PyTorch':>9}")
    for label, eager, replay, theirs in rows:
        for _ in range(3):
            eager(), replay(), theirs()  # trace, compile, warm up
        times = interleaved_medians({"eager": eager, "replay": replay, "torch": theirs}, steps=5 * args.rounds, block=5)
        print(f"{label:52} {times['eager'] * 1e3:7.2f}ms {times['replay'] * 1e3:7.2f}ms {times['torch'] * 1e3:7.2f}ms")


if __name__ == "__main__":
    main()
