"""The multi-directional MDLSTM computation on a skewed grid, with a hand-written backward pass.

:func:`mdlstm_dense` maps a dense batch ``[B, H, W, C]`` (+ validity mask) to
``[B, H, W, D * u]``:

1. the ``D`` direction flips of the input (0: top-left -> bottom-right, 1: flip W, 2: flip H,
   3: flip both) are stacked on a leading direction axis, so that one scan serves all
   directions, each with its own weights (batched matmuls over the direction axis);
2. each image is skewed (row ``r`` shifted right by ``r``) and the grid is laid out
   column-major and units-first as ``[T, D, C, N]`` with ``T = W + H - 1`` skewed columns and
   ``N = B * H`` rows (rows last: the gate slices of a column are contiguous blocks, and the
   elementwise gate math runs on long rows).  The upper predecessor of row ``n`` is row
   ``n - 1`` of the previous column: a ``tf.roll`` by one row, times a 0/1 "has an upper
   neighbour" mask over the rows that zeroes what the first row of every image sees;
3. :func:`skewed_scan` runs one ``tf.while_loop`` over the ``T`` columns;
4. the outputs are unskewed, each direction flipped back, and the directions concatenated on
   the channel axis in direction order.

Two ways of feeding the input (``in_loop``):

* ``in_loop=True``: the raw input (with a constant-1 channel for the bias) enters the loop's
  matmul together with the predecessors' states: ``[W; b; U1; U2; V1; V2]^T`` times
  ``[x; 1; h1; h2; s1; s2]``;
* ``in_loop=False`` ("precompute"): ``W^T x + b`` is computed for all cells by one big matmul
  before the loop, and the loop's matmul covers only ``[h1; h2; s1; s2]``.

Only the peephole gates see ``s1, s2``, so the loop matmul's weights have a zero block (the
other gates' rows of ``V``).  For small ``units`` one matmul with the zero block is cheapest
(fewer ops per step); from ``SPLIT_MIN_UNITS`` on, two matmuls skip it (the block is ~27 % of
the matmul FLOPs), see benchmarks/mdlstm_speed.py.

Backward pass.  The generic gradient of a ``tf.while_loop`` pushes every intermediate of every
step on stacks and runs about twice the forward's op count per step.  :func:`skewed_scan`
instead keeps each column's matmul input, memory and saved gate activations and runs its own
reverse loop: per column the cell's elementwise backward, one matmul (two when split) for the
input/state gradients and one (two) accumulating the weight gradients.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from tfnhr.layers.mdlstm_cells import CellType
from tfnhr.ops.scan_kernel import scan_ops
from tfnhr.ops.skew import skew, skew_mask, unskew

SPLIT_MIN_UNITS = 8
"""From this many units on, the loop computes the peephole gates and the others with two
matmuls instead of one matmul with a zero block."""

DIRECTION_FLIPS = ((), (2,), (1,), (1, 2))
"""Axes of a ``[B, H, W, ...]`` tensor flipped for directions 0..3 (scan origin top-left,
top-right, bottom-left, bottom-right)."""


class MDLSTMParams(NamedTuple):
    """Per-direction weights, stacked on a leading direction axis ``D``.

    ``G = 5 u`` core gate columns in the cell's fused order (see :mod:`mdlstm_cells`), ``P`` /
    ``Q``: peephole / output gates times ``u``.
    """

    kernel: tf.Tensor  # [D, C, G]        input -> core gates  (z = x @ kernel + ...)
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
    stack_residuals: bool,
    kernel: str = "ops",
) -> tf.Tensor:
    """Multi-directional MDLSTM over a dense batch.

    Args:
      x: ``[B, H, W, C]`` float input (B, H, W >= 1).
      mask: ``[B, H, W]`` validity (0/1) in ``x``'s dtype.  States are zero at invalid cells
        and nothing flows through them.
      params: weights for ``D = params.kernel.shape[0]`` directions.
      cell: the cell type.
      in_loop: feed the raw input into the loop's matmul (else precompute ``x @ W + b``).
      stack_residuals: see :func:`skewed_scan` (True under XLA).
      kernel: ``"ops"``: :func:`skewed_scan` (TensorFlow ops, XLA-compilable); ``"compiled"``:
        :func:`compiled_scan` (the C++ ops of :mod:`tfnhr.ops.scan_kernel`; not under XLA).
    Returns:
      ``[B, H, W, D * u]``, directions concatenated in order, each in the input orientation;
      zero at invalid cells.
    """
    compiled = kernel == "compiled"
    cols, mask_cols, up_mask, weights, vo = _loop_inputs(x, mask, params, in_loop, compiled)
    if compiled:
        h_all = compiled_scan(cols, mask_cols, up_mask, weights, vo, cell, in_loop)
    else:
        h_all = skewed_scan(cols, mask_cols, up_mask, weights, vo, cell, in_loop, stack_residuals)
    return _from_columns(h_all, tf.shape(x))


def mdlstm_dense_memory(
    x: tf.Tensor, mask: tf.Tensor, params: MDLSTMParams, cell: CellType
) -> tf.Tensor:
    """The memory states ``s`` of :func:`mdlstm_dense` in its output layout (no gradient)."""
    cols, mask_cols, up_mask, weights, vo = _loop_inputs(x, mask, params, in_loop=True, split=False)
    _, s_ta, _, _ = _forward(cols, mask_cols, up_mask, weights, vo, cell, in_loop=True)
    return _from_columns(s_ta.stack(), tf.shape(x))


def _loop_inputs(x, mask, params: MDLSTMParams, in_loop: bool, split: bool):
    """The arguments of :func:`skewed_scan`: columns ``[T, D, K_x, N]``, mask
    ``[T, D, 1, N]``, the upper-neighbour mask ``[N]``, the loop matmul's transposed weights
    (one or two, see there; always two when ``split``) and the transposed output peephole
    ``[D, Q, u]``."""
    directions = params.kernel.shape[0]
    shape = tf.shape(x)
    if in_loop:
        x = tf.concat([x, tf.ones(tf.concat([shape[:3], [1]], 0), x.dtype)], axis=-1)
    cols = _to_columns(skew(_stack_directions(x, directions)), directions)
    mask_cols = _to_columns(
        skew_mask(_stack_directions(mask, directions))[..., tf.newaxis], directions
    )
    up_mask = tf.cast(tf.range(shape[0] * shape[1]) % shape[1] != 0, x.dtype)
    if in_loop:
        rows = tf.concat([params.kernel, params.bias[:, tf.newaxis, :], params.recurrent], axis=1)
    else:
        kernel_t = tf.transpose(params.kernel, [0, 2, 1])
        cols = tf.matmul(kernel_t, cols) + params.bias[:, :, tf.newaxis]
        rows = params.recurrent
    # rows [D, K - 2u, G] over [(x; 1;) h1; h2], peephole [D, 2u, P] over [s1; s2]
    gates, peep = rows.shape[2], params.peephole.shape[2]
    if split or params.output_peephole.shape[1] >= SPLIT_MIN_UNITS:
        weights = (
            tf.concat([rows[:, :, :peep], params.peephole], axis=1),  # [D, K, P]
            rows[:, :, peep:],  # [D, K - 2u, G - P]
        )
    else:
        peephole = tf.pad(params.peephole, [[0, 0], [0, 0], [0, gates - peep]])
        weights = (tf.concat([rows, peephole], axis=1),)  # [D, K, G]
    return (
        cols, mask_cols, up_mask, tuple(tf.transpose(w, [0, 2, 1]) for w in weights),
        tf.transpose(params.output_peephole, [0, 2, 1]),
    )


def _flip(t: tf.Tensor, direction: int) -> tf.Tensor:
    axes = DIRECTION_FLIPS[direction]
    return tf.reverse(t, axes) if axes else t


def _stack_directions(t: tf.Tensor, directions: int) -> tf.Tensor:
    """``[B, H, W, ...]`` -> ``[D * B, H, W, ...]``, direction-major."""
    return tf.concat([_flip(t, d) for d in range(directions)], axis=0)


def _to_columns(t: tf.Tensor, directions: int) -> tf.Tensor:
    """Skewed ``[D * B, H, T, K]`` -> ``[T, D, K, N]``, ``N = B * H``."""
    shape = tf.shape(t)
    t = tf.reshape(t, [directions, -1, shape[1], shape[2], shape[3]])
    t = tf.transpose(t, [3, 0, 4, 1, 2])
    return tf.reshape(t, [shape[2], directions, shape[3], -1])


def _from_columns(cols: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
    """Columns ``[T, D, u, N]`` -> ``[B, H, W, D * u]`` (inverse of the layout above)."""
    directions, u = cols.shape[1], cols.shape[2]
    batch, height, width = shape[0], shape[1], shape[2]
    cols = tf.reshape(cols, [-1, directions, u, batch, height])
    cols = tf.transpose(cols, [1, 3, 4, 0, 2])  # [D, B, H, T, u]
    cols = tf.reshape(cols, [directions * batch, height, -1, u])
    out = tf.reshape(unskew(cols, width), [directions, batch, height, width, u])
    return tf.concat([_flip(o, d) for d, o in enumerate(tf.unstack(out))], axis=-1)


def skewed_scan(
    xin: tf.Tensor,
    mask: tf.Tensor,
    up_mask: tf.Tensor,
    weights: tuple[tf.Tensor, ...],
    output_peephole: tf.Tensor,
    cell: CellType,
    in_loop: bool,
    stack_residuals: bool,
) -> tf.Tensor:
    """One ``tf.while_loop`` over skewed columns, with a hand-written gradient.

    Row ``n - 1`` is the upper predecessor of row ``n`` where ``up_mask[n]`` is 1 (the
    indices wrap around: row ``0``'s is row ``N - 1``); rows with ``up_mask[n] = 0`` have none.

    Args:
      xin: ``[T, D, K_x, N]``: raw input incl. a constant-1 channel (``in_loop``), else the
        precomputed core pre-activations ``W^T x + b`` (``K_x = G = 5u``).
      mask: ``[T, D, 1, N]`` cell validity (0/1).
      up_mask: ``[N]`` 0/1: whether a row has an upper neighbour (row ``n - 1``).
      weights: the loop matmul's (transposed) weights over its input
        ``[(x; 1;) h1; h2; s1; s2]`` of ``K`` rows: either ``([D, G, K],)`` (one matmul, zero
        block included) or ``([D, P, K], [D, G - P, K - 2u])`` (peephole gates, other gates).
      output_peephole: ``[D, Q, u]`` (transposed).
      cell: the cell type.
      in_loop: see above.
      stack_residuals: stack the per-column values the backward pass needs into
        ``[T, ...]`` tensors (needed under XLA, where the stacks are free: a TensorArray is one
        buffer there) or keep them as TensorArrays of per-column tensors (better without
        XLA: stacking copies them into large fresh allocations, and TensorFlow's default CPU
        allocator page-faults those in anew every step).
    Returns:
      ``[T, D, u, N]`` cell outputs (masked).  Differentiable w.r.t. ``xin``, ``weights`` and
      ``output_peephole``.
    """

    @tf.custom_gradient
    def scan(xin, vo, *weights):
        h_ta, *residuals = _forward(xin, mask, up_mask, weights, vo, cell, in_loop)
        h_all = h_ta.stack()
        if stack_residuals:
            residuals = [ta.stack() for ta in residuals]

        def grad(dh_all):
            dxin, dvo, dweights = _backward(
                dh_all, xin, mask, up_mask, weights, vo, h_all, *residuals, cell, in_loop
            )
            return (dxin, dvo, *dweights)

        return h_all, grad

    return scan(xin, output_peephole, *weights)


def compiled_scan(
    xin: tf.Tensor,
    mask: tf.Tensor,
    up_mask: tf.Tensor,
    weights: tuple[tf.Tensor, tf.Tensor],
    output_peephole: tf.Tensor,
    cell: CellType,
    in_loop: bool,
) -> tf.Tensor:
    """:func:`skewed_scan` as two compiled ops (:mod:`tfnhr.ops.scan_kernel`): the loop over
    columns, forward and backward, runs in C++.  Same arguments and result, except that
    ``weights`` must be the split pair ``([D, P, K], [D, G - P, K - 2u])``.

    Raises:
      KernelUnavailable: the kernel cannot be built or loaded on this machine.
    """
    ops = scan_ops()
    attrs = {"cell": cell.name, "in_loop": in_loop}

    @tf.custom_gradient
    def scan(xin, vo, w_top, w_bot):
        h_all, s_all, acts = ops.tfnhr_mdlstm_scan_forward(
            xin, mask, up_mask, w_top, w_bot, vo, **attrs)

        def grad(dh_all):  # (dxin, dvo, dw_top, dw_bot)
            return ops.tfnhr_mdlstm_scan_backward(
                dh_all, xin, mask, up_mask, w_top, w_bot, vo, h_all, s_all, acts, **attrs)

        return h_all, grad

    return scan(xin, output_peephole, *weights)


def _gates(weights, x_t, inp, peep: int, in_loop: bool):
    """``(z_top, z_bot)`` pre-activations of one column from the loop matmul's input."""
    if len(weights) == 1:
        z = tf.matmul(weights[0], inp)
        if not in_loop:
            z += x_t
        return tf.split(z, [peep, z.shape[1] - peep], axis=1)
    w_top, w_bot = weights
    z_top = tf.matmul(w_top, inp)
    z_bot = tf.matmul(w_bot, inp[:, :w_bot.shape[2]])
    if in_loop:
        return z_top, z_bot
    x_top, x_bot = tf.split(x_t, [peep, z_bot.shape[1]], axis=1)
    return z_top + x_top, z_bot + x_bot


def _forward(xin, mask, up_mask, weights, vo, cell, in_loop):
    """Returns TensorArrays over columns of ``h``, ``s``, the cell's saved ``acts`` and the
    loop matmul's input."""
    steps = tf.shape(xin)[0]
    u = vo.shape[2]
    peep = cell.peephole_gates * u
    zeros = tf.zeros(tf.stack([tf.shape(xin)[1], u, tf.shape(xin)[3]]), xin.dtype)

    def body(t, h, s, h_ta, s_ta, acts_ta, inp_ta):
        x_t, m_t = tf.gather(xin, t), tf.gather(mask, t)
        h_up, s_up = tf.roll(h, 1, axis=2) * up_mask, tf.roll(s, 1, axis=2) * up_mask
        inp = tf.concat(([x_t] if in_loop else []) + [h, h_up, s, s_up], axis=1)
        z_top, z_bot = _gates(weights, x_t, inp, peep, in_loop)
        y, s_new, acts = cell.forward(z_top, z_bot, s, s_up, vo)
        h, s = y * m_t, s_new * m_t
        return (
            t + 1, h, s, h_ta.write(t, h), s_ta.write(t, s), acts_ta.write(t, acts),
            inp_ta.write(t, inp),
        )

    tas = [tf.TensorArray(xin.dtype, size=steps) for _ in range(4)]
    _, _, _, *tas = tf.while_loop(lambda t, *_: t < steps, body, [0, zeros, zeros, *tas])
    return tas


def _column(columns: tf.Tensor | tf.TensorArray, t: tf.Tensor) -> tf.Tensor:
    """Column ``t`` of a ``[T, ...]`` tensor or TensorArray."""
    return columns.read(t) if isinstance(columns, tf.TensorArray) else tf.gather(columns, t)


def _backward(
    dh_all, xin, mask, up_mask, weights, vo, h_all, s_all, acts_all, inp_all, cell, in_loop
):
    """Reverse loop: returns the gradients of ``xin``, ``vo`` and ``weights``."""
    steps = tf.shape(xin)[0]
    u = vo.shape[2]
    k_x = xin.shape[2] if in_loop else 0
    transposed = [tf.transpose(w, [0, 2, 1]) for w in weights]
    zeros = tf.zeros_like(h_all[0])

    def body(i, gh, gs, dvo, dweights, dx_ta):
        t = steps - 1 - i
        m_t = tf.gather(mask, t)
        dy = (gh + tf.gather(dh_all, t)) * m_t
        dz_top, dz_bot, ds1, ds2, dvo_t = cell.backward(
            _column(acts_all, t), tf.gather(h_all, t), _column(s_all, t), dy, gs * m_t, vo
        )
        inp = _column(inp_all, t)
        fused = len(weights) == 1
        dz = tf.concat([dz_top, dz_bot], axis=1) if fused or not in_loop else None
        if fused:
            dinp = tf.matmul(transposed[0], dz)
            dweights = [dweights[0] + tf.matmul(dz, inp, transpose_b=True)]
        else:
            dinp = tf.matmul(transposed[0], dz_top) + tf.pad(
                tf.matmul(transposed[1], dz_bot), [[0, 0], [0, 2 * u], [0, 0]]
            )
            dweights = [
                dweights[0] + tf.matmul(dz_top, inp, transpose_b=True),
                dweights[1] + tf.matmul(dz_bot, inp[:, :weights[1].shape[2]], transpose_b=True),
            ]
        dx, dh1, dh2, ds1m, ds2m = tf.split(dinp, [k_x, u, u, u, u], axis=1)
        gh = dh1 + tf.roll(dh2 * up_mask, -1, axis=2)
        gs = ds1 + ds1m + tf.roll((ds2 + ds2m) * up_mask, -1, axis=2)
        return i + 1, gh, gs, dvo + dvo_t, dweights, dx_ta.write(t, dx if in_loop else dz)

    _, _, _, dvo, dweights, dx_ta = tf.while_loop(
        lambda i, *_: i < steps, body,
        [0, zeros, zeros, tf.zeros_like(vo), [tf.zeros_like(w) for w in weights],
         tf.TensorArray(xin.dtype, size=steps)],
    )
    return dx_ta.stack(), dvo, dweights
