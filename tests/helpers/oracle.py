"""An independent NumPy model of the seed job: forward pass, hand-derived gradient, plain GD.

Shares no code with dptrain, so agreement between the two is evidence, not tautology.
"""
from __future__ import annotations

import numpy as np


def forward(p: dict, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hidden activations and outputs of tanh(x W1 + b1) W2 + b2."""
    h = np.tanh(x @ p["W1"] + p["b1"])
    return h, h @ p["W2"] + p["b2"]


def loss(p: dict, x: np.ndarray, y: np.ndarray) -> float:
    """Mean squared error over all rows."""
    return float(np.mean((forward(p, x)[1] - y) ** 2))


def gradient(p: dict, x: np.ndarray, y: np.ndarray) -> dict:
    """d MSE / d params by the chain rule, written out by hand."""
    h, out = forward(p, x)
    d_out = 2.0 * (out - y) / len(x)             # dL/d out, (n, 1)
    d_pre = (d_out @ p["W2"].T) * (1.0 - h * h)  # back through W2 and tanh, (n, h)
    return {"W2": h.T @ d_out, "b2": d_out.sum(0, keepdims=True),
            "W1": x.T @ d_pre, "b1": d_pre.sum(0, keepdims=True)}


def descend(p: dict, x: np.ndarray, y: np.ndarray, lr: float, steps: int,
            log_every: int) -> list[tuple[int, float]]:
    """Full-batch GD; (k, loss after k updates) for k = 0, log_every, ... and k = steps."""
    p = {k: v.copy() for k, v in p.items()}
    logged = []
    for k in range(steps + 1):
        if k % log_every == 0 or k == steps:
            logged.append((k, loss(p, x, y)))
        if k < steps:
            g = gradient(p, x, y)
            p = {name: p[name] - lr * g[name] for name in p}
    return logged


def replay(p0: dict, x: np.ndarray, y: np.ndarray, slices: list, computed_on: np.ndarray,
           worker: np.ndarray, lr: float, sums: int = 1) -> list[dict]:
    """Asynchronous SGD as logged: weights after each update, where update v is
    w[v+1] = w[v] - lr * sums * (gradient of worker's rows, slices[worker - 1], at w[computed_on])."""
    history = [p0]
    for c, src in zip(computed_on, worker):
        rows = slices[src - 1]
        g = gradient(history[c], x[rows], y[rows])
        history.append({k: v - lr * sums * g[k] for k, v in history[-1].items()})
    return history


def seed_data(n: int, dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """The seed problem, built whole: x = linspace(-2, 2, n), y = x^2, as columns, rounded to
    dtype. Every function here computes in the dtype of what it is given."""
    x = np.linspace(-2.0, 2.0, n).reshape(-1, 1)
    return x.astype(dtype), (x ** 2).astype(dtype)


def draw_params(hidden: int, seed: int) -> dict:
    """Standard-normal weights of a 1 -> hidden -> 1 network (test inputs, any generator)."""
    rng = np.random.RandomState(seed)
    return {"W1": rng.randn(1, hidden), "b1": rng.randn(1, hidden),
            "W2": rng.randn(hidden, 1), "b2": rng.randn(1, 1)}


def train(p: dict, x: np.ndarray, y: np.ndarray, lr: float, steps: int, log_every: int,
          optimizer: str = "sgd", batch: int | None = None, momentum: float = 0.9,
          beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> list[tuple[int, float]]:
    """GD / heavy-ball / Adam on consecutive mini-batches of the rows as given (no shuffle).

    Batch b of each epoch is rows [bB, (b+1)B); logs (k, full-data loss after k updates).
    """
    p = {k: v.copy() for k, v in p.items()}
    n, batch = len(x), batch or len(x)
    per_epoch = -(-n // batch)
    vel = {k: np.zeros_like(v) for k, v in p.items()}
    m, s = dict(vel), dict(vel)
    logged = []
    for k in range(steps + 1):
        if k % log_every == 0 or k == steps:
            logged.append((k, loss(p, x, y)))
        if k == steps:
            break
        b = k % per_epoch
        g = gradient(p, x[b * batch:(b + 1) * batch], y[b * batch:(b + 1) * batch])
        for name in p:
            if optimizer == "sgd":
                p[name] = p[name] - lr * g[name]
            elif optimizer == "momentum":
                vel[name] = momentum * vel[name] - lr * g[name]
                p[name] = p[name] + vel[name]
            else:
                t = k + 1
                m[name] = beta1 * m[name] + (1 - beta1) * g[name]
                s[name] = beta2 * s[name] + (1 - beta2) * g[name] ** 2
                m_hat, s_hat = m[name] / (1 - beta1 ** t), s[name] / (1 - beta2 ** t)
                p[name] = p[name] - lr * m_hat / (np.sqrt(s_hat) + eps)
    return logged


def scheduled_rate(lr: float, kind: str, warmup: int, total: int, decay: float, every: int,
                   k: int) -> float:
    """The rate of update k + 1 as docs/flags.md defines --lr-schedule and --warmup."""
    if k < warmup:
        return lr * (k + 1) / warmup
    t, span = k - warmup, max(1, total - warmup)
    period = every or max(1, span // 3)
    return {"constant": lr, "cosine": lr * (1 + np.cos(np.pi * min(t, span) / span)) / 2,
            "step": lr * decay ** (t // period), "exponential": lr * decay ** (t / period)}[kind]


def train_with_options(p: dict, x: np.ndarray, y: np.ndarray, steps: int, log_every: int,
                       rate, optimizer: str = "sgd", weight_decay: float = 0.0,
                       clip_norm: float | None = None, val: tuple | None = None,
                       patience: int | None = None) -> tuple[list[dict], dict]:
    """Full-batch training with a rate per update (rate(k)), decay, clipping, validation at
    every log and early stopping, as the docs define them: (records, final weights), the
    records {step, loss[, val_loss]} at k = 0, log_every, ... and the last step run."""
    p = {k: v.copy() for k, v in p.items()}
    slots = {name: {"v": np.zeros_like(w), "m": np.zeros_like(w), "s": np.zeros_like(w)}
             for name, w in p.items()}
    records, best = [], (np.inf, None, 0)  # (loss, weights, validations since)
    for k in range(steps + 1):
        if k % log_every == 0 or k == steps:
            records.append({"step": k, "loss": loss(p, x, y)})
            if val is not None:
                records[-1]["val_loss"] = loss(p, *val)
                if records[-1]["val_loss"] < best[0]:
                    best = (records[-1]["val_loss"], {n: w.copy() for n, w in p.items()}, 0)
                else:
                    best = (best[0], best[1], best[2] + 1)
                if patience and best[2] >= patience:
                    break
        if k == steps:
            break
        g = gradient(p, x, y)
        if clip_norm is not None:
            norm = np.sqrt(sum(float((v * v).sum()) for v in g.values()))
            g = {n: v * (clip_norm / max(norm, clip_norm)) for n, v in g.items()}
        _apply(p, g, slots, rate(k), k + 1, optimizer, weight_decay)
    return records, (best[1] if patience else p)


def _apply(p: dict, g: dict, slots: dict, lr: float, t: int, optimizer: str,
           weight_decay: float) -> None:
    """One update in place: L2 for sgd and momentum (0.9), AdamW (0.9, 0.999, 1e-8)."""
    for name in p:
        s, gn = slots[name], g[name]
        if optimizer != "adam":
            gn = gn + weight_decay * p[name]
        if optimizer == "sgd":
            p[name] = p[name] - lr * gn
        elif optimizer == "momentum":
            s["v"] = 0.9 * s["v"] - lr * gn
            p[name] = p[name] + s["v"]
        else:
            s["m"] = 0.9 * s["m"] + 0.1 * gn
            s["s"] = 0.999 * s["s"] + 0.001 * gn ** 2
            m_hat, s_hat = s["m"] / (1 - 0.9 ** t), s["s"] / (1 - 0.999 ** t)
            p[name] = p[name] - lr * (m_hat / (np.sqrt(s_hat) + 1e-8) + weight_decay * p[name])
