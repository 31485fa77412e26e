"""An elementwise in-place op whose input overlaps the written tensor in part: PyTorch refuses it
("unsupported operation: some elements of the input tensor and the written-to tensor refer to a
single memory location"), where NumPy would compute it as if the input were copied first."""

import pytest
import torch

import staticgrad as sg

CASES = {
    "a.mul_(a.t())": lambda a: a.mul_(a.t()),
    "a.add_(a)": lambda a: a.add_(a),
    "a[1:].mul_(a[:2])": lambda a: a[1:].mul_(a[:2]),
    "v[1:].copy_(v[:8])": lambda a: a.view(9)[1:].copy_(a.view(9)[:8]),
    "v[:4:2].add_(v[1:5:2])": lambda a: a.view(9)[:4:2].add_(a.view(9)[1:5:2]),
    "v[:4].add_(v[4:8])": lambda a: a.view(9)[:4].add_(a.view(9)[4:8]),
    "a.add_(a[0])": lambda a: a.add_(a[0]),
    "a[1].add_(a[0])": lambda a: a[1].add_(a[0]),
    "a.copy_(a.t())": lambda a: a.copy_(a.t()),
    "a.addcmul_(a.t(), a)": lambda a: a.addcmul_(a.t(), a),
    "a[0].mul_(a[0].expand(3))": lambda a: a[0].mul_(a[0].expand(3)),
    "a[0:2].add_(a[1:3])": lambda a: a[0:2].add_(a[1:3]),
    "a.sub_(a.t().t())": lambda a: a.sub_(a.t().t()),
    "a[:, 0].add_(a[:, 1])": lambda a: a[:, 0].add_(a[:, 1]),
    "a[:, 0].add_(a[0])": lambda a: a[:, 0].add_(a[0]),
    "a[1:].pow_(2)": lambda a: a[1:].pow_(2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_partially_overlapping_in_place_ops_are_refused_as_in_pytorch(case):
    outcomes = []
    for lib in (torch, sg):
        a = lib.arange(9.0).reshape(3, 3)
        try:
            CASES[case](a)
            outcomes.append(("done", a.numpy().tolist()))
        except RuntimeError as error:
            outcomes.append(("refused", str(error)))
    assert outcomes[1] == outcomes[0]


def test_the_refusal_comes_before_autograd_records_anything():
    x = sg.ones(4, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match=r"^unsupported operation: some elements"):
        y[1:].mul_(y[:3].detach())
    assert type(y.grad_fn).__name__ == "MulBackward0" and y._version == 0
    y.sum().backward()
    assert x.grad.tolist() == [2.0] * 4
