"""Fit a random degree-4 polynomial with one Linear layer over the features x, x^2, x^3, x^4.

Each batch draws fresh x ~ N(0, 1); the loss is smooth L1 and the update is written by hand on
``param.data`` from ``param.grad``. Runs with PyTorch, or with staticgrad through
``examples/run_with_staticgrad.py``.
"""

import argparse
from itertools import count

import torch
import torch.nn.functional as F

POLY_DEGREE = 4


def make_features(x):
    """(N,) -> (N, POLY_DEGREE) with columns x, x^2, ..., x^POLY_DEGREE."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def poly_desc(W, b):
    """The polynomial as text, e.g. 'y = +1.20 x^1 -0.43 x^2 ... +0.70'."""
    result = "y = "
    for i, w in enumerate(W):
        result += f"{w:+.2f} x^{i + 1} "
    result += f"{b[0]:+.2f}"
    return result


def main():
    parser = argparse.ArgumentParser(description="Polynomial regression with a hand-written update")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=1000, help="stop after this many batches at most")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--tolerance", type=float, default=1e-3, help="stop once the loss falls below this")
    parser.add_argument("--log-interval", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    W_target = torch.randn(POLY_DEGREE, 1) * 5
    b_target = torch.randn(1) * 5

    def f(x):
        return x.mm(W_target) + b_target.item()

    def get_batch(batch_size):
        random = torch.randn(batch_size)
        x = make_features(random)
        return x, f(x)

    fc = torch.nn.Linear(W_target.size(0), 1)
    for batch_idx in count(1):
        batch_x, batch_y = get_batch(args.batch_size)
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-args.lr * param.grad)
        if batch_idx == 1 or batch_idx % args.log_interval == 0:
            print(f"batch {batch_idx} train_loss {loss:.6f}")
        if loss < args.tolerance or batch_idx >= args.batches:
            break

    print(f"batch {batch_idx} train_loss {loss:.6f}")
    print(f"Loss: {loss:.6f} after {batch_idx} batches")
    print("==> Learned function:\t" + poly_desc(fc.weight.view(-1), fc.bias))
    print("==> Actual function:\t" + poly_desc(W_target.view(-1), b_target))


if __name__ == "__main__":
    main()
