"""Naive NumPy reference of the multi-directional MDLSTM, for tests.

Deliberately independent of the layer's implementation: no skewing, no fused matrices, no
TensorFlow.  For every direction the input is flipped (direction 0: none, 1: along W, 2: along
H, 3: both), then a per-pixel double loop in scan order (row by row, left to right) computes
each cell from its left ``(i, j-1)`` and upper ``(i-1, j)`` neighbours (zero state outside the
image and at invalid cells), the result is flipped back, and the directions are concatenated
on the channel axis.  The weights are read per gate by name through
``layer.gate_weights(direction)``; the equations are written out here from the cell
definitions in ``tfnhr/layers/mdlstm_cells.py``'s docstring.
"""

from __future__ import annotations

import numpy as np

FLIP_AXES = {0: (), 1: (1,), 2: (0,), 3: (0, 1)}  # axes of one [H, W, ...] image


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _pre(w, x, h1, h2, s1=None, s2=None, m=None):
    """Pre-activation of one gate: ``x W + h1 U1 + h2 U2 (+ s1 V1 + s2 V2) (+ m Vo) + b``."""
    v = x @ w["W"] + h1 @ w["U1"] + h2 @ w["U2"] + w["b"]
    if "V1" in w:
        v = v + s1 @ w["V1"] + s2 @ w["V2"]
    if m is not None:
        v = v + m @ w["Vo"]
    return v


def cell_step(cell: str, w: dict, x, h1, s1, h2, s2):
    """One cell: returns ``(y, s)``."""
    if cell == "lstm":
        a = np.tanh(_pre(w["a"], x, h1, h2))
        i = _sigmoid(_pre(w["i"], x, h1, h2, s1, s2))
        f1 = _sigmoid(_pre(w["f1"], x, h1, h2, s1, s2))
        f2 = _sigmoid(_pre(w["f2"], x, h1, h2, s1, s2))
        s = i * a + f1 * s1 + f2 * s2
        o = _sigmoid(_pre(w["o"], x, h1, h2, m=s))
        return o * np.tanh(s), s
    a = np.tanh(_pre(w["a"], x, h1, h2))
    i = _sigmoid(_pre(w["i"], x, h1, h2, s1, s2))
    lam = _sigmoid(_pre(w["l"], x, h1, h2, s1, s2))
    sbar = lam * s1 + (1.0 - lam) * s2
    s = i * a + (1.0 - i) * sbar
    m = sbar if cell == "leaky_lp" else s
    o1 = _sigmoid(_pre(w["o1"], x, h1, h2, m=m))
    o2 = _sigmoid(_pre(w["o2"], x, h1, h2, m=m))
    return np.tanh(o1 * sbar + o2 * s), s


def scan_one_direction(cell: str, weights: dict, image, valid):
    """Top-left -> bottom-right scan of one ``[H, W, C]`` image.

    Returns ``(y, s)``, each ``[H, W, u]``.
    """
    height, width, _ = image.shape
    units = weights["a"]["b"].shape[0]
    y = np.zeros((height, width, units))
    s = np.zeros((height, width, units))
    zero = np.zeros(units)
    for i in range(height):
        for j in range(width):
            if not valid[i, j]:
                continue  # invalid cell: zero state, zero output
            h1, s1 = (y[i, j - 1], s[i, j - 1]) if j > 0 else (zero, zero)
            h2, s2 = (y[i - 1, j], s[i - 1, j]) if i > 0 else (zero, zero)
            y[i, j], s[i, j] = cell_step(cell, weights, image[i, j], h1, s1, h2, s2)
    return y, s


def reference_mdlstm(layer, x, mask=None, return_memory: bool = False) -> np.ndarray:
    """Outputs (or memories) of ``layer`` (an ``MDLSTM2D``) on ``x`` ``[B, H, W, C]``.

    Args:
      layer: built ``MDLSTM2D``; its ``cell``, ``directions`` and ``gate_weights`` are used.
      x: ``[B, H, W, C]`` array.
      mask: optional ``[B, H, W]`` bool array (True = valid).
      return_memory: return the memory states ``s`` instead of the outputs.
    Returns:
      ``[B, H, W, units * directions]`` float64 array.
    """
    x = np.asarray(x, np.float64)
    mask = np.ones(x.shape[:3], bool) if mask is None else np.asarray(mask, bool)
    per_direction = []
    for d in range(layer.directions):
        weights = {
            gate: {k: np.asarray(v, np.float64) for k, v in w.items()}
            for gate, w in layer.gate_weights(d).items()
        }
        outs = []
        for b in range(x.shape[0]):
            flip = FLIP_AXES[d]
            image = np.flip(x[b], flip) if flip else x[b]
            valid = np.flip(mask[b], flip) if flip else mask[b]
            y, s = scan_one_direction(layer.cell, weights, image, valid)
            result = s if return_memory else y
            outs.append(np.flip(result, flip) if flip else result)
        per_direction.append(np.stack(outs))
    return np.concatenate(per_direction, axis=-1)
