"""The time loop of the stacked recurrent layers in ordinary ops, for what the one-op LSTM layer
does not cover: a PackedSequence (each sequence stops at its own last step), and an LSTM with
projections (``proj_size``). PyTorch's native (non-oneDNN) recurrent code does the same steps.

Each layer and direction projects its whole input at once (``x W_ih^T + b_ih``), then steps:
forward from the first step, where the batch shrinks as sequences end (the rows that ended keep
their last state, which becomes their final hidden state); reverse from the last step, where the
batch grows as sequences begin (their rows join with the initial state). Packed outputs are
concatenated (CatBackward0), padded ones stacked (StackBackward0), as in PyTorch."""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad.nn import functional as F


def _rows(state: tuple, start: int, stop: int) -> tuple:
    return tuple(s[start:stop] for s in state)


def _forward_direction(step, projected: list, state: tuple) -> tuple:
    """(step outputs, final state) from the first step to the last; ``projected[t]`` has the rows of
    the sequences still running at step t, so ``state`` shrinks with it."""
    outputs, ended = [], []
    for x in projected:
        size = x.shape[0]
        running = state[0].shape[0]
        if size < running:
            ended.append(_rows(state, size, running))
            state = _rows(state, 0, size)
        state = step(x, state)
        outputs.append(state[0])
    ended.append(state)
    if len(ended) > 1:
        state = tuple(fn.cat([piece[k] for piece in reversed(ended)], 0) for k in range(len(state)))
    return outputs, state


def _reverse_direction(step, projected: list, initial: tuple) -> tuple:
    """(step outputs in time order, final state) from the last step to the first; rows join from
    ``initial`` as their sequences begin (the batch grows going back in time)."""
    last = projected[-1].shape[0]
    state = _rows(initial, 0, last) if last < initial[0].shape[0] else initial
    outputs = []
    for x in reversed(projected):
        size, running = x.shape[0], state[0].shape[0]
        if size > running:
            state = tuple(fn.cat([s, i[running:size]], 0) for s, i in zip(state, initial))
        state = step(x, state)
        outputs.append(state[0])
    outputs.reverse()
    return outputs, state


def run_layers(module, input, batch_sizes, initial: list, step_of):
    """Every layer and direction of ``module`` over ``input``: padded (L, N, H_in) when ``batch_sizes``
    is None, else a PackedSequence's data (sum of batch_sizes, H_in). ``initial`` holds each layer and
    direction's starting state (a tuple), ``step_of(index)`` its step function ``(x, state) -> state``
    (state[0] is the output). Returns (output, final states in layer-direction order)."""
    directions = 2 if module.bidirectional else 1
    finals = []
    for layer in range(module.num_layers):
        if layer > 0 and module.dropout and module.training:
            input = F.dropout(input, module.dropout, True)
        outputs = []
        for direction in range(directions):
            index = layer * directions + direction
            w_ih, b_ih = module.all_weights[index][0], module.all_weights[index][2] if module.bias else None
            projected = F.linear(input, w_ih, b_ih)
            if batch_sizes is None:
                steps = list(projected.unbind(0))
            else:
                offsets = [0]
                for size in batch_sizes:
                    offsets.append(offsets[-1] + size)
                steps = [projected[offsets[t]:offsets[t + 1]] for t in range(len(batch_sizes))]
            run = _reverse_direction if direction else _forward_direction
            step_outputs, final = run(step_of(index), steps, initial[index])
            outputs.append(fn.stack(step_outputs) if batch_sizes is None else fn.cat(step_outputs, 0))
            finals.append(final)
        input = outputs[0] if directions == 1 else fn.cat(outputs, input.dim() - 1)
    return input, finals
