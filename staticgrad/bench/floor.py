"""The physical floor for the bench MLP: one training step written by hand in NumPy with every
buffer preallocated (``out=`` everywhere), the same math as staticgrad's recorded step."""

from __future__ import annotations

import numpy as np


class HandWrittenMLPStep:
    """tanh MLP + MSE loss + SGD with momentum, on the given weights (updated in place)."""

    def __init__(self, weights: list, biases: list, batch: int, lr: float, momentum: float):
        self.w = weights            # (out, in) float32, like nn.Linear
        self.b = biases
        self.lr, self.momentum = lr, momentum
        dtype = weights[0].dtype
        self.acts = [None] + [np.empty((batch, w.shape[0]), dtype) for w in weights]
        self.pre = [np.empty((batch, w.shape[0]), dtype) for w in weights]
        self.grad_out = [np.empty((batch, w.shape[0]), dtype) for w in weights]
        self.grad_in = [np.empty((batch, w.shape[1]), dtype) for w in weights]
        self.gw = [np.empty_like(w) for w in weights]
        self.gb = [np.empty_like(b) for b in biases]
        self.vw = [np.zeros_like(w) for w in weights]
        self.vb = [np.zeros_like(b) for b in biases]
        self.loss = np.empty((), dtype)
        self.first = True

    def __call__(self, x: np.ndarray, y: np.ndarray) -> float:
        n = len(self.w)
        h = x
        for i in range(n):
            np.matmul(h, self.w[i].T, out=self.pre[i])
            np.add(self.pre[i], self.b[i], out=self.pre[i])
            if i < n - 1:
                np.tanh(self.pre[i], out=self.pre[i])
            self.acts[i + 1] = self.pre[i]
            h = self.pre[i]
        diff = self.grad_out[n - 1]
        np.subtract(h, y, out=diff)
        self.loss[...] = np.mean(diff * diff)
        np.multiply(diff, 2.0 / diff.size, out=diff)
        g = diff
        for i in range(n - 1, -1, -1):
            inp = x if i == 0 else self.acts[i]
            np.matmul(g.T, inp, out=self.gw[i])
            np.add.reduce(g, axis=0, out=self.gb[i])
            if i > 0:
                np.matmul(g, self.w[i], out=self.grad_in[i])
                t = self.grad_out[i - 1]
                np.multiply(inp, inp, out=t)
                np.subtract(1, t, out=t)
                np.multiply(self.grad_in[i], t, out=t)
                g = t
        for params, grads, velocities in ((self.w, self.gw, self.vw), (self.b, self.gb, self.vb)):
            for p, gr, v in zip(params, grads, velocities):
                if self.first:
                    np.copyto(v, gr)
                else:
                    np.multiply(v, self.momentum, out=v)
                    np.add(v, gr, out=v)
                np.subtract(p, self.lr * v, out=p)
        self.first = False
        return self.loss
