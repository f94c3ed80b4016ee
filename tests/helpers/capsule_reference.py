"""Independent NumPy references of the capsule operations (Sabour et al. 2017): ``squash`` in
closed form, and dynamic routing by agreement one example and one capsule pair at a time."""

from __future__ import annotations

import numpy as np


def squash_reference(s: np.ndarray) -> np.ndarray:
    """``squash`` over the last axis: ``|s|^2 / (1 + |s|^2) * s / |s|``, and 0 where ``s`` is 0."""
    norm = np.linalg.norm(s, axis=-1, keepdims=True)
    return np.where(norm > 0, norm**2 / (1 + norm**2) * s / np.maximum(norm, 1e-30), 0.0)


def routing_reference(u: np.ndarray, kernel: np.ndarray, capsules: int, routings: int):
    """Sabour et al.'s Procedure 1, one example and one (i, j) pair at a time.

    ``u``: ``[B, I, Din]``; ``kernel``: ``[I, Din, J·D]``. Returns ``(v, s)`` of the last iteration,
    ``[B, J, D]``, and the last coupling coefficients ``[B, I, J]``.
    """
    batch, n_in, _ = u.shape
    dim = kernel.shape[-1] // capsules
    v_all, s_all = np.zeros((batch, capsules, dim)), np.zeros((batch, capsules, dim))
    coupling_all = np.zeros((batch, n_in, capsules))
    for b in range(batch):
        u_hat = np.zeros((n_in, capsules, dim))
        for i in range(n_in):
            for j in range(capsules):
                u_hat[i, j] = u[b, i] @ kernel[i, :, j * dim:(j + 1) * dim]
        logits = np.zeros((n_in, capsules))
        for _ in range(routings):
            coupling = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            s = np.array([sum(coupling[i, j] * u_hat[i, j] for i in range(n_in)) for j in range(capsules)])
            v = squash_reference(s)
            for i in range(n_in):
                for j in range(capsules):
                    logits[i, j] += u_hat[i, j] @ v[j]
        v_all[b], s_all[b], coupling_all[b] = v, s, coupling
    return v_all, s_all, coupling_all
