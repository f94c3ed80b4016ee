"""MDLSTM cell types: gate layout, forward step and hand-written backward step.

All three cells see the input ``x`` (``C`` channels) and two predecessors, the *left* one
``(h1, s1)`` and the *upper* one ``(h2, s2)`` (in scan direction), each ``units`` wide.
Every gate ``g`` has an input matrix ``W_g`` (C x u), recurrent matrices ``U_g1, U_g2`` (u x u, on
``h1``, ``h2``) and a bias ``b_g``.  Peephole matrices (full u x u matrices, as in Wenniger et al. 2019's
grouped convolutions) are present only where listed.  ``W x`` stands for the matrix product in
the layer's row-vector convention, ``x @ W`` with ``W`` of shape ``[C, u]``
(``MDLSTM2D.gate_weights`` returns the matrices in that form):

``"leaky_lp"`` (Wenniger et al. 2019's variant of Leifert et al.'s Leaky LP cell; the default)::

    a    = tanh   (W_a x  + U_a1 h1  + U_a2 h2                          + b_a)
    i    = sigmoid(W_i x  + U_i1 h1  + U_i2 h2  + V_i1 s1 + V_i2 s2      + b_i)
    l    = sigmoid(W_l x  + U_l1 h1  + U_l2 h2  + V_l1 s1 + V_l2 s2      + b_l)   # lambda gate
    sbar = l * s1 + (1 - l) * s2
    s    = i * a + (1 - i) * sbar
    o1   = sigmoid(W_o1 x + U_o11 h1 + U_o12 h2 + Vo_o1 m                + b_o1)
    o2   = sigmoid(W_o2 x + U_o21 h1 + U_o22 h2 + Vo_o2 m                + b_o2)
    y    = tanh(o1 * sbar + o2 * s)                with m = sbar (previous, mixed memory)

``"leaky_lp_new_state"``: the same with ``m = s`` (Leifert's diagram: output gates see the new
memory).  ``sbar`` and ``s`` are convex combinations of values in [-1, 1], so ``|s| <= 1``
always holds for both Leaky LP cells.

``"lstm"`` (Graves' 2-D MDLSTM with two forget gates)::

    i, f1, f2 = sigmoid(W x + U1 h1 + U2 h2 + V1 s1 + V2 s2 + b)   # per gate
    a  = tanh   (W_a x + U_a1 h1 + U_a2 h2 + b_a)
    s  = i * a + f1 * s1 + f2 * s2
    o  = sigmoid(W_o x + U_o1 h1 + U_o2 h2 + Vo_o s + b_o)
    y  = o * tanh(s)

Nothing bounds ``f1 + f2`` by 1, so the LSTM state can grow geometrically along the scan
diagonal and overflow on large images; that instability is why Leaky LP exists.

Fused layout.  The ``G = 5 u`` pre-activations of the *core* gates are ordered with the
peephole gates first and the output gates last (``leaky_lp``: ``[i, l, a, o1, o2]``; ``lstm``:
``[i, f1, f2, a, o]``); the step functions take them as two blocks, ``z_top`` (the gates that
see ``s1, s2``) and ``z_bot`` (the others), which the scan computes with one matmul (zero
peephole blocks included) or two (see :mod:`tfnhr.layers.mdlstm_scan`).  The output gates'
memory term ``Vo m`` is a separate small matmul, since ``m`` depends on the step's own gates.

The forward step saves ``acts`` (gate activations plus what the backward step needs) so that
the backward step needs neither the states of the previous column nor any recomputation of
matmuls.  Where a cell is invalid the caller zeroes ``dy`` and ``ds``; the backward step then
gives zero gradients there whatever the saved values are.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class CellType:
    """Static description of a cell type and its step functions.

    Attributes:
      name: the ``cell=`` string.
      gates: names of the core gates in fused column order (each ``units`` wide).
      peephole_gates: how many of the first ``gates`` see ``s1, s2`` through ``V``.
      output_gates: how many of the last ``gates`` see the memory ``m`` through ``Vo``.
      forward: ``(z_top, z_bot, s1, s2, vo) -> (y, s, acts)`` for one column of ``N`` cells
        per direction, in the units-first layout ``[D, channels, N]``.  ``z_top``
        ``[D, P, N]`` and ``z_bot`` ``[D, 5u - P, N]`` hold the core pre-activations (input,
        recurrent and peephole terms and bias) of the peephole gates and of the other gates
        (``P = peephole_gates * u``), ``s1, s2`` ``[D, u, N]`` the left and upper predecessor
        memories, ``vo`` ``[D, Q, u]`` the output gates' memory weights
        (``Q = output_gates * u``; the gates get ``vo @ m``).  Returns the outputs and new
        memories ``[D, u, N]`` (not yet masked) and the saved activations ``acts``
        ``[D, 7u, N]``.
      backward: ``(acts, y, s, dy, ds, vo) -> (dz_top, dz_bot, ds1, ds2, dvo)``.  Given the
        saved ``acts``, the column's (possibly masked) ``y, s`` and the gradients ``dy, ds``
        w.r.t. them (zero at invalid cells): the gradients of ``z_top`` and ``z_bot``, the
        direct (non-matmul) gradients ``[D, u, N]`` w.r.t. ``s1, s2`` and this column's
        gradient ``[D, Q, u]`` w.r.t. ``vo``.
    """

    name: str
    gates: tuple[str, ...]
    peephole_gates: int
    output_gates: int
    forward: Callable
    backward: Callable


def _dsigmoid(g):
    return g * (1.0 - g)


def _dtanh(t):
    return 1.0 - t * t


# Leaky LP saves acts = [i, l, a, o1, o2, sbar, s1 - s2].


def _leaky_forward(zil, z_bot, s1, s2, vo, new_state: bool):
    u = s1.shape[1]
    za, zo = tf.split(z_bot, [u, 2 * u], axis=1)
    il = tf.sigmoid(zil)
    i, l = tf.split(il, 2, axis=1)
    a = tf.tanh(za)
    diff = s1 - s2
    sbar = s2 + l * diff
    s = sbar + i * (a - sbar)
    o = tf.sigmoid(zo + tf.matmul(vo, s if new_state else sbar))
    o1, o2 = tf.split(o, 2, axis=1)
    y = tf.tanh(o1 * sbar + o2 * s)
    return y, s, tf.concat([il, a, o, sbar, diff], axis=1)


def _leaky_backward(acts, y, s, dy, ds, vo, new_state: bool):
    u = y.shape[1]
    il, a, o, sbar, diff = tf.split(acts, [2 * u, u, 2 * u, u, u], axis=1)
    i, l = tf.split(il, 2, axis=1)
    o1, o2 = tf.split(o, 2, axis=1)
    dq = dy * _dtanh(y)
    dzo = tf.concat([dq * sbar, dq * s], axis=1) * _dsigmoid(o)
    dm = tf.matmul(vo, dzo, transpose_a=True)
    dvo = tf.matmul(dzo, s if new_state else sbar, transpose_b=True)
    dsbar = dq * o1
    ds = ds + dq * o2
    if new_state:
        ds = ds + dm
    else:
        dsbar = dsbar + dm
    dsbar = dsbar + ds * (1.0 - i)
    dzil = tf.concat([ds * (a - sbar), dsbar * diff], axis=1) * _dsigmoid(il)
    dza = ds * i * _dtanh(a)
    ds1 = dsbar * l
    return dzil, tf.concat([dza, dzo], axis=1), ds1, dsbar - ds1, dvo


# LSTM saves acts = [i, f1, f2, a, o, s1, s2].


def _lstm_forward(zg, z_bot, s1, s2, vo):
    za, zo = tf.split(z_bot, 2, axis=1)
    g = tf.sigmoid(zg)
    i, f1, f2 = tf.split(g, 3, axis=1)
    a = tf.tanh(za)
    s = i * a + f1 * s1 + f2 * s2
    o = tf.sigmoid(zo + tf.matmul(vo, s))
    y = o * tf.tanh(s)
    return y, s, tf.concat([g, a, o, s1, s2], axis=1)


def _lstm_backward(acts, y, s, dy, ds, vo):
    del y  # o * tanh(s) is rebuilt from its factors
    u = s.shape[1]
    g, a, o, s1, s2 = tf.split(acts, [3 * u, u, u, u, u], axis=1)
    i, f1, f2 = tf.split(g, 3, axis=1)
    ts = tf.tanh(s)
    dzo = dy * ts * _dsigmoid(o)
    ds = ds + dy * o * _dtanh(ts) + tf.matmul(vo, dzo, transpose_a=True)
    dzg = tf.concat([ds * a, ds * s1, ds * s2], axis=1) * _dsigmoid(g)
    dza = ds * i * _dtanh(a)
    dvo = tf.matmul(dzo, s, transpose_b=True)
    return dzg, tf.concat([dza, dzo], axis=1), ds * f1, ds * f2, dvo


CELL_TYPES = {
    "leaky_lp": CellType(
        "leaky_lp", ("i", "l", "a", "o1", "o2"), 2, 2,
        functools.partial(_leaky_forward, new_state=False),
        functools.partial(_leaky_backward, new_state=False),
    ),
    "leaky_lp_new_state": CellType(
        "leaky_lp_new_state", ("i", "l", "a", "o1", "o2"), 2, 2,
        functools.partial(_leaky_forward, new_state=True),
        functools.partial(_leaky_backward, new_state=True),
    ),
    "lstm": CellType(
        "lstm", ("i", "f1", "f2", "a", "o"), 3, 1, _lstm_forward, _lstm_backward
    ),
}
"""The cell types by ``cell=`` name."""
