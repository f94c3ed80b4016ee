"""The multi-directional MDLSTM computation on a skewed grid, with a hand-written backward pass.

:func:`mdlstm_dense` maps a dense batch ``[B, H, W, C]`` (+ validity mask) to
``[B, H, W, D * u]``:

1. the ``D`` direction flips of the input (0: top-left -> bottom-right, 1: flip W, 2: flip H,
   3: flip both) are stacked on a leading direction axis, so that one scan serves all
   directions, each with its own weights (batched matmuls over the direction axis);
2. each image is skewed (row ``r`` shifted right by ``r``), one always-invalid row is appended
   below it, and the grid is laid out column-major as ``[T, D, N, C]`` with
   ``T = W + H - 1`` skewed columns and ``N = B * (H + 1)`` rows.  The upper predecessor of row
   ``n`` is row ``n - 1`` of the previous column: a ``tf.roll`` by one row; the appended row
   (whose states are always zero) is what the first row of every image sees;
3. :func:`skewed_scan` runs one ``tf.while_loop`` over the ``T`` columns;
4. the outputs are unskewed, each direction flipped back, and the directions concatenated on
   the channel axis in direction order.

Two ways of feeding the input (``in_loop``):

* ``in_loop=True``: the raw input (with a constant-1 channel for the bias) enters the loop
  and one matmul per column computes ``[x, 1, h1, s1, h2, s2] @ [W; b; U1; V1; U2; V2]``;
* ``in_loop=False`` ("precompute"): ``x @ W + b`` is computed for all cells by one big matmul
  before the loop, and the loop's matmul covers only ``[h1, s1, h2, s2]``.

Backward pass.  The generic gradient of a ``tf.while_loop`` pushes every intermediate of every
step on stacks and runs about twice the forward's op count per step.  :func:`skewed_scan`
instead saves one activation tensor per column and runs its own reverse loop with one matmul
per column for the input/state gradients; the weight gradients are one big matmul over all
columns after the loop.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from tfnhr.layers.mdlstm_cells import CellType
from tfnhr.ops.skew import skew, skew_mask, unskew

DIRECTION_FLIPS = ((), (2,), (1,), (1, 2))
"""Axes of a ``[B, H, W, ...]`` tensor flipped for directions 0..3 (scan origin top-left,
top-right, bottom-left, bottom-right)."""


class MDLSTMParams(NamedTuple):
    """Per-direction weights, stacked on a leading direction axis ``D``.

    ``G = 5 u`` core gate columns in the cell's fused order (see :mod:`mdlstm_cells`), ``P`` /
    ``Q``: peephole / output gates times ``u``.
    """

    kernel: tf.Tensor  # [D, C, G]        input -> core gates
    bias: tf.Tensor  # [D, G]
    recurrent: tf.Tensor  # [D, 2u, G]    rows [h1; h2] -> core gates
    peephole: tf.Tensor  # [D, 2u, P]     rows [s1; s2] -> the first P gate columns
    output_peephole: tf.Tensor  # [D, u, Q]  memory m -> the last Q gate columns


def mdlstm_dense(
    x: tf.Tensor,
    mask: tf.Tensor,
    params: MDLSTMParams,
    cell: CellType,
    in_loop: bool,
) -> tf.Tensor:
    """Multi-directional MDLSTM over a dense batch.

    Args:
      x: ``[B, H, W, C]`` float input (B, H, W >= 1).
      mask: ``[B, H, W]`` validity (0/1) in ``x``'s dtype.  States are zero at invalid cells
        and nothing flows through them.
      params: weights for ``D = params.kernel.shape[0]`` directions.
      cell: the cell type.
      in_loop: feed the raw input into the loop's matmul (else precompute ``x @ W + b``).
    Returns:
      ``[B, H, W, D * u]``, directions concatenated in order, each in the input orientation;
      zero at invalid cells.
    """
    cols, mask_cols, weights = _loop_inputs(x, mask, params, in_loop)
    h_all = skewed_scan(cols, mask_cols, weights, params.output_peephole, cell, in_loop)
    return _from_columns(h_all, tf.shape(x))


def mdlstm_dense_memory(
    x: tf.Tensor, mask: tf.Tensor, params: MDLSTMParams, cell: CellType
) -> tf.Tensor:
    """The memory states ``s`` of :func:`mdlstm_dense` in its output layout (no gradient)."""
    cols, mask_cols, weights = _loop_inputs(x, mask, params, in_loop=True)
    _, s_all, _ = _forward(cols, mask_cols, weights, params.output_peephole, cell, True)
    return _from_columns(s_all, tf.shape(x))


def _loop_inputs(x, mask, params: MDLSTMParams, in_loop: bool):
    """The loop's column-major input ``[T, D, N, K]``, mask ``[T, D, N, 1]`` and weights."""
    directions = params.kernel.shape[0]
    rows = tf.shape(x)[0] * (tf.shape(x)[1] + 1)
    if in_loop:
        x = tf.concat([x, tf.ones_like(x[..., :1])], axis=-1)
    cols = _to_columns(skew(_stack_directions(x, directions)), directions, rows)
    mask_cols = _to_columns(
        skew_mask(_stack_directions(mask, directions))[..., tf.newaxis], directions, rows
    )
    if in_loop:
        weights = tf.concat(
            [params.kernel, params.bias[:, tf.newaxis, :], _recurrent_rows(params)], axis=1
        )
    else:
        cols = tf.matmul(cols, params.kernel) + params.bias[:, tf.newaxis, :]
        weights = _recurrent_rows(params)
    return cols, mask_cols, weights


def _from_columns(cols: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
    """Skewed columns ``[T, D, N, u]`` -> ``[B, H, W, D * u]`` (inverse of the layout above)."""
    directions, u = cols.shape[1], cols.shape[3]
    batch, height, width = shape[0], shape[1], shape[2]
    cols = tf.reshape(cols, [-1, directions * batch, height + 1, u])
    cols = tf.transpose(cols, [1, 2, 0, 3])[:, :height]
    out = tf.reshape(unskew(cols, width), [directions, batch, height, width, u])
    return tf.concat([_flip(out[d], d) for d in range(directions)], axis=-1)


def _recurrent_rows(params: MDLSTMParams) -> tf.Tensor:
    """``[U1; V1; U2; V2]`` as ``[D, 4u, G]``, peepholes zero-padded to all gate columns."""
    missing = params.kernel.shape[2] - params.peephole.shape[2]
    peep = tf.pad(params.peephole, [[0, 0], [0, 0], [0, missing]])
    u1, u2 = tf.split(params.recurrent, 2, axis=1)
    v1, v2 = tf.split(peep, 2, axis=1)
    return tf.concat([u1, v1, u2, v2], axis=1)


def _flip(t: tf.Tensor, direction: int) -> tf.Tensor:
    axes = DIRECTION_FLIPS[direction]
    return tf.reverse(t, axes) if axes else t


def _stack_directions(t: tf.Tensor, directions: int) -> tf.Tensor:
    """``[B, H, W, ...]`` -> ``[D * B, H, W, ...]``, direction-major."""
    return tf.concat([_flip(t, d) for d in range(directions)], axis=0)


def _to_columns(t: tf.Tensor, directions: int, rows: tf.Tensor) -> tf.Tensor:
    """Skewed ``[D * B, H, T, K]`` -> column-major ``[T, D, N, K]``, with a zero row appended
    below each image."""
    t = tf.pad(t, [[0, 0], [0, 1], [0, 0], [0, 0]])
    t = tf.transpose(t, [2, 0, 1, 3])
    return tf.reshape(t, [tf.shape(t)[0], directions, rows, tf.shape(t)[3]])


def skewed_scan(
    xin: tf.Tensor,
    mask: tf.Tensor,
    weights: tf.Tensor,
    output_peephole: tf.Tensor,
    cell: CellType,
    in_loop: bool,
) -> tf.Tensor:
    """One ``tf.while_loop`` over skewed columns, with a hand-written gradient.

    Row ``n - 1`` is the upper predecessor of row ``n`` (row ``0``'s is row ``N - 1``): rows
    without an upper neighbour must have an always-invalid row above them.

    Args:
      xin: ``[T, D, N, K]``: raw input incl. a constant-1 channel (``in_loop``), else the
        precomputed core pre-activations ``x @ W + b`` (``K = G = 5u``).
      mask: ``[T, D, N, 1]`` cell validity (0/1).
      weights: ``[D, K + 4u, G]`` (``in_loop``) or ``[D, 4u, G]``: the loop matmul's weights,
        rows ``[(x;) h1; s1; h2; s2]``.
      output_peephole: ``[D, u, Q]``.
      cell: the cell type.
      in_loop: see above.
    Returns:
      ``[T, D, N, u]`` cell outputs (masked).  Differentiable w.r.t. ``xin``, ``weights`` and
      ``output_peephole``.
    """

    @tf.custom_gradient
    def scan(xin, weights, vo):
        h_all, s_all, acts_all = _forward(xin, mask, weights, vo, cell, in_loop)

        def grad(dh_all):
            return _backward(
                dh_all, xin, mask, weights, vo, h_all, s_all, acts_all, cell, in_loop
            )

        return h_all, grad

    return scan(xin, weights, output_peephole)


def _forward(xin, mask, weights, vo, cell, in_loop):
    steps = tf.shape(xin)[0]
    u = vo.shape[1]
    state_shape = tf.concat([tf.shape(xin)[1:3], [u]], axis=0)
    zeros = tf.zeros(state_shape, xin.dtype)

    def body(t, h, s, h_ta, s_ta, acts_ta):
        x_t, m_t = tf.gather(xin, t), tf.gather(mask, t)
        h_up, s_up = tf.roll(h, 1, axis=1), tf.roll(s, 1, axis=1)
        if in_loop:
            z = tf.matmul(tf.concat([x_t, h, s, h_up, s_up], axis=-1), weights)
        else:
            z = x_t + tf.matmul(tf.concat([h, s, h_up, s_up], axis=-1), weights)
        y, s_new, acts = cell.forward(z, s, s_up, vo)
        h, s = y * m_t, s_new * m_t
        return t + 1, h, s, h_ta.write(t, h), s_ta.write(t, s), acts_ta.write(t, acts)

    tas = [tf.TensorArray(xin.dtype, size=steps) for _ in range(3)]
    _, _, _, h_ta, s_ta, acts_ta = tf.while_loop(
        lambda t, *_: t < steps, body, [0, zeros, zeros, *tas]
    )
    return h_ta.stack(), s_ta.stack(), acts_ta.stack()


def _backward(dh_all, xin, mask, weights, vo, h_all, s_all, acts_all, cell, in_loop):
    steps = tf.shape(xin)[0]
    u = vo.shape[1]
    k_x = xin.shape[-1] if in_loop else 0
    zeros = tf.zeros_like(h_all[0])

    def body(i, gh, gs, dz_ta, *dx_ta):
        t = steps - 1 - i
        m_t = tf.gather(mask, t)
        dy = (gh + tf.gather(dh_all, t)) * m_t
        dz, ds1, ds2 = cell.backward(
            tf.gather(acts_all, t), tf.gather(h_all, t), tf.gather(s_all, t), dy, gs * m_t, vo
        )
        dinp = tf.matmul(dz, weights, transpose_b=True)
        if in_loop:
            dx, dh1, ds1m, dh2, ds2m = tf.split(dinp, [k_x, u, u, u, u], axis=-1)
            dx_ta = (dx_ta[0].write(t, dx),)
        else:
            dh1, ds1m, dh2, ds2m = tf.split(dinp, 4, axis=-1)
        gh = dh1 + tf.roll(dh2, -1, axis=1)
        gs = ds1 + ds1m + tf.roll(ds2 + ds2m, -1, axis=1)
        return (i + 1, gh, gs, dz_ta.write(t, dz), *dx_ta)

    tas = [tf.TensorArray(xin.dtype, size=steps) for _ in range(2 if in_loop else 1)]
    _, _, _, dz_ta, *dx_ta = tf.while_loop(
        lambda i, *_: i < steps, body, [0, zeros, zeros, *tas]
    )
    dz_all = dz_ta.stack()
    # Inputs of every column's loop matmul, rebuilt from the saved states.
    hs_prev = tf.pad(tf.concat([h_all, s_all], -1), [[1, 0], [0, 0], [0, 0], [0, 0]])[:-1]
    inp = [hs_prev, tf.roll(hs_prev, 1, axis=2)]
    if in_loop:
        inp = [xin] + inp
    dweights = tf.einsum("tdnk,tdng->dkg", tf.concat(inp, -1), dz_all)
    q = vo.shape[2]
    dvo = tf.einsum(
        "tdnu,tdnq->duq", cell.memory(acts_all, s_all), dz_all[..., -q:]
    )
    dxin = dx_ta[0].stack() if in_loop else dz_all
    return dxin, dweights, dvo
