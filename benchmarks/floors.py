"""The physical floors for the bench MLP step, written by hand: the same math as staticgrad's
recorded step (tanh MLP, MSE loss, SGD with momentum) with every buffer preallocated.

- NumPyFloor: NumPy calls with ``out=`` everywhere.
- NumbaFloor: NumPy's BLAS for the matmuls, and the elementwise work fused into serial Numba
  kernels (bias add + tanh, tanh backward + bias gradient, MSE loss + gradient, the momentum
  update). tanh is a float32 rational approximation (odd degree-13 over even degree-6, fitted
  for this benchmark, within a few ulp) because Numba's scalar tanh cannot vectorize.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# tanh(x) ~ x * P(x^2) / Q(x^2) on [-9, 9] (clamped), least-squares fit in relative error.
_P = (0.9999999974420761, 0.13085997933717658, 0.003106130779456173, 1.1175740993821107e-05,
      -2.030423202757998e-08, 5.311769506198378e-11, -8.565305037847233e-14)
_Q = (1.0, 0.46419326900397007, 0.02450396518849605, 0.0002549235034161092)
P0, P1, P2, P3, P4, P5, P6 = (np.float32(c) for c in _P)
Q0, Q1, Q2, Q3 = (np.float32(c) for c in _Q)
LIMIT = np.float32(9.0)


@njit(error_model="numpy", cache=True)
def _tanh(x):
    x = min(max(x, -LIMIT), LIMIT)
    z = x * x
    p = ((((((P6 * z + P5) * z + P4) * z + P3) * z + P2) * z + P1) * z + P0)
    q = (((Q3 * z + Q2) * z + Q1) * z + Q0)
    return x * p / q


@njit(error_model="numpy", cache=True)
def bias_tanh(pre, bias, out):
    n, m = pre.shape
    for i in range(n):
        for j in range(m):
            out[i, j] = _tanh(pre[i, j] + bias[j])


@njit(error_model="numpy", cache=True)
def bias_mse(pre, bias, target, grad, grad_bias):
    n, m = pre.shape
    scale = np.float32(2.0 / (n * m))
    total = 0.0
    grad_bias[:] = 0
    for i in range(n):
        for j in range(m):
            d = pre[i, j] + bias[j] - target[i, j]
            total += d * d
            g = d * scale
            grad[i, j] = g
            grad_bias[j] += g
    return total / (n * m)


@njit(error_model="numpy", cache=True)
def tanh_backward_colsum(grad_in, act, grad, grad_bias):
    n, m = act.shape
    grad_bias[:] = 0
    for i in range(n):
        for j in range(m):
            a = act[i, j]
            g = grad_in[i, j] * (np.float32(1.0) - a * a)
            grad[i, j] = g
            grad_bias[j] += g


@njit(error_model="numpy", cache=True)
def momentum_update(param, grad, velocity, lr, momentum, first):
    p, g, v = param.ravel(), grad.ravel(), velocity.ravel()
    lr32, m32 = np.float32(lr), np.float32(momentum)
    for i in range(p.size):
        vi = g[i] if first else v[i] * m32 + g[i]
        v[i] = vi
        p[i] = p[i] - lr32 * vi


class _MLPFloor:
    def __init__(self, weights: list, biases: list, batch: int, lr: float, momentum: float):
        self.w, self.b = weights, biases
        self.lr, self.momentum = lr, momentum
        dtype = weights[0].dtype
        self.pre = [np.empty((batch, w.shape[0]), dtype) for w in weights]
        self.act = [np.empty((batch, w.shape[0]), dtype) for w in weights]
        self.grad = [np.empty((batch, w.shape[0]), dtype) for w in weights]
        self.grad_in = [np.empty((batch, w.shape[1]), dtype) for w in weights]
        self.gw = [np.empty_like(w) for w in weights]
        self.gb = [np.empty_like(b) for b in biases]
        self.vw = [np.zeros_like(w) for w in weights]
        self.vb = [np.zeros_like(b) for b in biases]
        self.first = True


class NumPyFloor(_MLPFloor):
    def __call__(self, x, y):
        n = len(self.w)
        h = x
        for i in range(n):
            np.matmul(h, self.w[i].T, out=self.pre[i])
            np.add(self.pre[i], self.b[i], out=self.pre[i])
            if i < n - 1:
                np.tanh(self.pre[i], out=self.act[i])
                h = self.act[i]
        out = self.pre[n - 1]
        g = self.grad[n - 1]
        np.subtract(out, y, out=g)
        loss = np.mean(g * g)
        np.multiply(g, np.float32(2.0 / g.size), out=g)
        for i in range(n - 1, -1, -1):
            inp = x if i == 0 else self.act[i - 1]
            np.matmul(g.T, inp, out=self.gw[i])
            np.add.reduce(g, axis=0, out=self.gb[i])
            if i > 0:
                np.matmul(g, self.w[i], out=self.grad_in[i])
                t = self.grad[i - 1]
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
                np.subtract(p, np.multiply(v, self.lr), out=p)
        self.first = False
        return loss


class NumbaFloor(_MLPFloor):
    def __call__(self, x, y):
        n = len(self.w)
        h = x
        for i in range(n - 1):
            np.matmul(h, self.w[i].T, out=self.pre[i])
            bias_tanh(self.pre[i], self.b[i], self.act[i])
            h = self.act[i]
        np.matmul(h, self.w[n - 1].T, out=self.pre[n - 1])
        loss = bias_mse(self.pre[n - 1], self.b[n - 1], y, self.grad[n - 1], self.gb[n - 1])
        g = self.grad[n - 1]
        for i in range(n - 1, -1, -1):
            inp = x if i == 0 else self.act[i - 1]
            np.matmul(g.T, inp, out=self.gw[i])
            if i > 0:
                np.matmul(g, self.w[i], out=self.grad_in[i])
                tanh_backward_colsum(self.grad_in[i], inp, self.grad[i - 1], self.gb[i - 1])
                g = self.grad[i - 1]
        for params, grads, velocities in ((self.w, self.gw, self.vw), (self.b, self.gb, self.vb)):
            for p, gr, v in zip(params, grads, velocities):
                momentum_update(p, gr, v, self.lr, self.momentum, self.first)
        self.first = False
        return loss
