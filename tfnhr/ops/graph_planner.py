"""The packing planner in TensorFlow ops: the same layouts as :func:`tfnhr.ops.packing.plan_packing`,
computed inside the graph (``tf.function``, SavedModel, XLA) instead of in Python.

:func:`plan_packing_graph` follows the NumPy planner step by step, so the two give **the same
placements** for every size list (property-tested in ``tests/tfnhr/ops/test_graph_planner.py``,
ties included); the NumPy planner stays the reference. The three greedy steps become loops whose
bodies are vector operations over the whole batch:

1. **Rows** (one loop iteration per example, ``B`` iterations): the examples are sorted by
   (bucket height descending, width descending, index ascending). Each iteration places one
   example: the first one in that order that is still unplaced, of the open row's bucket, and
   narrower than the row's free room minus one separator pixel; if there is none, the row is
   closed and the first unplaced example starts the next row. This is exactly the NumPy
   planner's "widest remaining example that still fits, equal widths in original order".
2. **Rows tallest first** (a stable sort; a no-op with ``height_step == 1``).
3. **First fit into canvases** (one iteration per row), run for all candidate canvas-height
   limits at once (``[L, B]`` state, ``L`` = 3 limits when ``max_height`` is ``None``); the limit
   whose layout computes the fewest skewed cells ``R * Hc * (Wc + Hc - 1)`` wins, ties to the lowest.

Every tensor in the loops has a static shape (``[B]`` or ``[L, B]``), so the planner compiles with
XLA for a static batch size; only the canvases it describes have data-dependent shapes.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf


class GraphPlacements(NamedTuple):
    """Where every example goes, as int64 tensors in the original example order.

    Attributes:
      canvas: ``[B]`` canvas (packed batch row) of each example.
      row: ``[B]`` packing row inside its canvas, top to bottom.
      y: ``[B]`` top pixel row of the example in its canvas.
      x: ``[B]`` left pixel column.
      canvas_shape: ``[3]`` ``(R, Hc, Wc)``: canvases, their pixel rows and columns.
    """

    canvas: tf.Tensor
    row: tf.Tensor
    y: tf.Tensor
    x: tf.Tensor
    canvas_shape: tf.Tensor


_PLACED = 2**62
"""Width given to placed examples in :func:`_fill_rows`: no row has room for it."""


def _fill_rows(bucket_end: tf.Tensor, width: tf.Tensor, row_width: tf.Tensor, present: tf.Tensor
               ) -> tuple[tf.Tensor, tf.Tensor]:
    """Greedy rows over examples already sorted by (bucket desc, width desc, index asc).

    Buckets are filled in order, so while a row is open every example of earlier buckets is
    placed and "of the open row's bucket" is "before the bucket's end". The loop state is kept to
    four tensors (each loop variable costs control-flow ops per iteration).

    Args:
      bucket_end: int64 ``[B]``, for each sorted example the sorted position after its bucket.
      width: int64 ``[B]`` widths in sorted order.
      row_width: int64 scalar, the width every row is filled up to.
      present: int64 scalar, how many examples to place (the rest are absent padding, sorted last).
    Returns:
      ``(row_and_x [B, 2], rows)``: each sorted example's row number and left column, and the
      number of rows (int64 scalar).
    """
    count = tf.shape(width, out_type=tf.int64)[0]
    positions = tf.range(count)

    def place(step, unplaced_width, row_state, row_and_x):
        free, open_end, next_x, rows = tf.unstack(row_state)
        fits = (unplaced_width < free) & (positions < open_end)
        candidate = tf.reduce_min(tf.where(fits, positions, count))
        new_row = candidate >= count
        first_unplaced = tf.reduce_min(tf.where(unplaced_width < _PLACED, positions, count))
        chosen = tf.where(new_row, first_unplaced, candidate)
        chosen_width = width[chosen]
        x = tf.where(new_row, tf.constant(0, tf.int64), next_x)
        rows += tf.cast(new_row, tf.int64)
        row_state = tf.stack([tf.where(new_row, row_width - chosen_width, free - chosen_width - 1),
                              tf.where(new_row, bucket_end[chosen], open_end),
                              x + chosen_width + 1, rows])
        unplaced_width = tf.tensor_scatter_nd_update(unplaced_width, chosen[None, None],
                                                     tf.constant([_PLACED], tf.int64))
        row_and_x = tf.tensor_scatter_nd_update(row_and_x, chosen[None, None], tf.stack([rows - 1, x])[None])
        return step + 1, unplaced_width, row_state, row_and_x

    start = (tf.constant(0, tf.int64), width, tf.zeros([4], tf.int64),
             tf.zeros(tf.stack([count, 2]), tf.int64))
    _, _, row_state, row_and_x = tf.while_loop(lambda step, *_: step < present, place, start)
    return row_and_x, row_state[3]


def _first_fit(row_height: tf.Tensor, rows: tf.Tensor, limits: tf.Tensor) -> tf.Tensor:
    """First fit of rows (in order) into canvases of at most ``limits[l]`` pixel rows, per limit.

    A row goes to the lowest-numbered canvas whose next free row (after one separator row, none
    in an unused canvas) leaves room for it; unused canvases always have room (every limit is at
    least the tallest row), and canvases are opened in order, so this is the NumPy planner's
    first fit.

    Args:
      row_height: int64 ``[N]`` row heights in stacking order; only the first ``rows`` are rows
        (``N`` is the batch size, the most rows there can be).
      rows: int64 scalar, the number of rows.
      limits: int64 ``[L]``.
    Returns:
      int64 ``[3, L, N]``: per limit and row, its canvas, its position among that canvas's rows,
      and its top pixel row (zeros past ``rows``).
    """
    limit_count = tf.shape(limits, out_type=tf.int64)[0]
    row_count = tf.shape(row_height, out_type=tf.int64)[0]
    canvases = tf.range(row_count)
    lanes = tf.range(limit_count)

    def stack(k, canvas_state, placed):
        next_y, used = tf.unstack(canvas_state)  # [L, N] each, per canvas
        height = row_height[k]
        fits = next_y + height <= limits[:, None]
        canvas = tf.reduce_min(tf.where(fits, canvases[None, :], row_count), axis=1)  # [L]
        where = tf.stack([lanes, canvas], axis=1)
        y, slot = tf.gather_nd(next_y, where), tf.gather_nd(used, where)
        canvas_state = tf.stack([tf.tensor_scatter_nd_update(next_y, where, y + height + 1),
                                 tf.tensor_scatter_nd_add(used, where, tf.ones_like(canvas))])
        row_where = tf.stack([tf.zeros_like(lanes), lanes, tf.fill([limit_count], k)], axis=1)
        placed = tf.tensor_scatter_nd_update(placed, tf.concat([row_where + [i, 0, 0] for i in range(3)], 0),
                                             tf.concat([canvas, slot, y], 0))
        return k + 1, canvas_state, placed

    empty = tf.zeros(tf.stack([3, limit_count, row_count]), tf.int64)
    _, _, placed = tf.while_loop(lambda k, *_: k < rows, stack,
                                 (tf.constant(0, tf.int64), empty[:2], empty))
    return placed


def plan_packing_graph(heights: tf.Tensor, widths: tf.Tensor, max_width: int | None = None,
                       max_height: int | None = None, height_step: int = 1,
                       jit: bool = False) -> GraphPlacements:
    """:func:`~tfnhr.ops.packing.plan_packing` in TensorFlow ops (graph, SavedModel and XLA safe).

    Args:
      heights, widths: int ``[B]`` example sizes in pixels, ``>= 1``, ``B >= 1`` (checked by
        run-time assertions).
      max_width, max_height, height_step: as in ``plan_packing`` (Python values; they are baked
        into the graph).
      jit: run the planner as one XLA computation, the batch padded to the next power of two
        (at least 8) so that few sizes are compiled (about 1-2 s each, once per process). The
        loops then cost about a tenth (a 256-example batch: 3.9 ms instead of 34 ms, one
        thread; planner timings: docs/results.md#packing-planner). ``False`` keeps plain
        TensorFlow ops, which every SavedModel consumer runs (TF Serving refuses XLA on CPU unless
        told otherwise).
    Returns:
      The :class:`GraphPlacements`; they equal ``plan_packing``'s placements field by field.
    """
    heights = tf.cast(tf.reshape(heights, [-1]), tf.int64)
    widths = tf.cast(tf.reshape(widths, [-1]), tf.int64)
    with tf.control_dependencies([
            tf.debugging.assert_positive(tf.size(heights), message="cannot plan an empty batch"),
            tf.debugging.assert_equal(tf.size(heights), tf.size(widths),
                                      message="heights and widths differ in length"),
            tf.debugging.assert_positive(tf.concat([heights, widths], 0),
                                         message="heights and widths must be >= 1 (zero-size example)")]):
        heights = tf.identity(heights)
    options = {"max_width": max_width, "max_height": max_height, "height_step": height_step}
    if not jit:
        return _plan(heights, widths, **options)
    count = tf.size(heights)
    padded = tf.maximum(8, tf.cast(2 ** tf.math.ceil(tf.math.log(tf.cast(count, tf.float64)) / tf.math.log(
        tf.constant(2.0, tf.float64))), tf.int32))
    padded = tf.maximum(padded, count)  # guards rounding in the logarithm
    padding = [[0, padded - count]]
    placements = _plan_xla(tf.pad(heights, padding), tf.pad(widths, padding), **options)
    return GraphPlacements(*(field[:count] for field in placements[:4]), placements.canvas_shape)


def _plan(heights: tf.Tensor, widths: tf.Tensor, max_width: int | None, max_height: int | None,
          height_step: int) -> GraphPlacements:
    """The planner on int64 ``[B]`` sizes; examples of size 0 are absent (they sort last, are
    never placed and get garbage placements): that is how :func:`plan_packing_graph` pads a batch
    to a compiled size."""
    count = tf.shape(heights, out_type=tf.int64)[0]
    present = tf.math.count_nonzero(heights, dtype=tf.int64)
    bucket = -(-heights // height_step) * height_step
    row_width = tf.maximum(tf.reduce_max(widths), max_width or 0)
    tallest = tf.reduce_max(heights)

    # (bucket desc, width desc, index asc): a stable ascending sort of the negated composite key
    order = tf.cast(tf.argsort(-(bucket * (tf.reduce_max(widths) + 1) + widths), stable=True), tf.int64)
    sorted_bucket = tf.gather(bucket, order)
    bucket_end = tf.searchsorted(-sorted_bucket, -sorted_bucket, side="right", out_type=tf.int64)
    sorted_row_and_x, rows = _fill_rows(bucket_end, tf.gather(widths, order), row_width, present)
    row, x = tf.unstack(tf.scatter_nd(order[:, None], sorted_row_and_x, tf.stack([count, 2])), axis=1)

    # rows tallest first (stable); slots past `rows` get height 0 and sort last
    real = tf.range(count) < rows
    row_height = tf.where(real, tf.math.unsorted_segment_max(heights, row, count), 0)
    row_order = tf.cast(tf.argsort(-row_height, stable=True), tf.int64)
    stacked_height = tf.gather(row_height, row_order)
    stacking_position = tf.scatter_nd(row_order[:, None], tf.range(count), [count])

    if max_height is None:
        limits = tf.stack([tallest, tallest * 3 // 2, tallest * 2])
    else:
        limits = tf.maximum(tallest, max_height)[None]
    canvas_of, slot_of, y_of = tf.unstack(_first_fit(stacked_height, rows, limits))  # [L, B] each
    canvas_count = tf.reduce_max(tf.where(real, canvas_of, -1), axis=1) + 1
    canvas_height = tf.reduce_max(tf.where(real, y_of + stacked_height, 0), axis=1)
    canvas_width = tf.reduce_max(x + widths)
    cells = canvas_count * canvas_height * (canvas_width + canvas_height - 1)
    lanes = tf.range(tf.size(cells, out_type=tf.int64))
    best = tf.reduce_min(tf.where(tf.equal(cells, tf.reduce_min(cells)), lanes, lanes[-1]))  # ties: lowest

    position = tf.gather(stacking_position, row)
    chosen = [tf.gather(array, best) for array in (canvas_of, slot_of, y_of, canvas_count, canvas_height)]
    # (tf.gather, not array[best]: XLA 2.18 crashes compiling a strided slice at a computed index)
    return GraphPlacements(canvas=tf.gather(chosen[0], position), row=tf.gather(chosen[1], position),
                           y=tf.gather(chosen[2], position), x=x,
                           canvas_shape=tf.stack([chosen[3], chosen[4], canvas_width]))


_plan_xla = tf.function(_plan, jit_compile=True)
