"""Example packing: tile variable-size images into a few canvases instead of padding them.

Wenniger et al. 2019, §V and Appendix B. An MDLSTM scans a skewed grid column by column (see
:mod:`tfnhr.ops.skew`), so its cost is the number of *skewed* cells it computes,
``R * Hc * (Wc + Hc - 1)`` for ``R`` canvases of ``Hc x Wc`` pixels, and its sequential length is
``Wc + Hc - 1`` loop steps. Padding every example of a batch to the batch's largest height and
width ("last-minute batch padding", LMBR, :func:`pad_batch`) wastes most of that on word images.
Packing (:func:`plan_packing` + :func:`pack`) instead

1. buckets the examples by height (a row holds examples of exactly one height, as in Wenniger et al. 2019,
   so no cell under a shorter example of a row is wasted; with ``height_step > 1`` a row holds
   the examples whose heights round up to the same multiple of ``height_step``, see
   :func:`plan_packing`);
2. fills rows greedily, each time adding the widest remaining example of the bucket that still
   fits the row width;
3. tiles the rows, with **one separator pixel between neighbouring examples of a row and one
   separator row between rows**, into canvases of at most ``max_height`` pixel rows (first-fit
   decreasing over the rows), the canvases stacked on the batch axis.

The separators are what makes packing exact: the MDLSTM zeroes its hidden and memory states at
cells whose mask is ``False``, and no two examples are 4-adjacent, so every left/up (and, after the
flips, right/down) dependency path between two examples crosses a zeroed cell. Packed, padded and
one-example-at-a-time computation therefore give the same per-example outputs.

Two ways to run it:

* **Static layout** (eager code, or ``tf.function`` with sizes known at trace time): plan with
  :func:`plan_packing` on :func:`image_sizes`, then :func:`pack` / :func:`unpack` with the
  resulting :class:`PackingLayout`, a plain Python object that is baked into a traced graph.
* **Graph layout** (ragged input of unknown sizes inside ``tf.function`` / ``model.fit`` / a
  SavedModel): :func:`pack_ragged_graph` plans with the same planner written in TensorFlow ops
  (:mod:`tfnhr.ops.graph_planner`, XLA-compiled by default) on the ragged row lengths and returns a
  :class:`PackingIndices` of index tensors; :func:`unpack` accepts those too.

In both, the data path is one ``tf.gather`` over the flat pixel values each way (pack, unpack, and
their gradients, which are each other's gather: forward + backward measured 1.5-2x cheaper than
``tf.scatter_nd`` and its gradient on a 200-word batch, one thread), so gradients flow back to
every example; the integer indices need none.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from tfnhr.ops.graph_planner import plan_packing_graph

Images = tf.RaggedTensor | Sequence[tf.Tensor]


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one example sits in a packed batch (all in pixels, 0-based).

    Attributes:
      index: original position of the example in the batch.
      canvas: which canvas (batch row of the packed tensor) holds it.
      row: packing-row number inside that canvas, top to bottom.
      y: top pixel row of the example in the canvas.
      x: left pixel column of the example in the canvas.
      height: example height ``H``.
      width: example width ``W``.
    """

    index: int
    canvas: int
    row: int
    y: int
    x: int
    height: int
    width: int


@dataclasses.dataclass(frozen=True)
class PackingLayout:
    """A packing plan: ``num_canvases`` canvases of ``canvas_height x canvas_width`` pixels.

    Attributes:
      placements: one :class:`Placement` per example, in original order
        (``placements[i].index == i``).
      num_canvases: ``R``, the batch size of the packed tensor.
      canvas_height: ``Hc``, pixel rows of every canvas.
      canvas_width: ``Wc``, pixel columns of every canvas.
    """

    placements: tuple[Placement, ...]
    num_canvases: int
    canvas_height: int
    canvas_width: int

    def valid_cells(self) -> int:
        """Pixels that belong to an example: ``sum(H_i * W_i)``."""
        return sum(p.height * p.width for p in self.placements)

    def computed_cells(self) -> int:
        """Cells a skewed MDLSTM scan of the canvases computes: ``R * Hc * (Wc + Hc - 1)``.

        ``computed_cells() / valid_cells()`` is the waste factor (1.0 = no waste).
        """
        height = self.canvas_height
        return self.num_canvases * height * (self.canvas_width + height - 1)


class PackingIndices(NamedTuple):
    """Index arrays that pack / unpack one batch (NumPy for a static layout, int64 tensors in
    :func:`pack_ragged_graph`, which returns them; :func:`unpack` accepts them for a layout).

    ``N = sum(H_i * W_i)`` example pixels, ``S = R * Hc * Wc`` canvas cells.

    Attributes:
      pixel_index: ``[N]``: for the example pixels in ragged flat-value order (example by
        example, row-major), the position in the flattened canvases ``[S]``.
      source_index: ``[S]``: its inverse, the example pixel each canvas cell holds, ``N`` for
        separator / padding cells.
      canvas_shape: ``[3]``: ``(R, Hc, Wc)``.
      heights: ``[B]`` example heights, original order.
      widths: ``[B]`` example widths, original order.
    """

    pixel_index: np.ndarray | tf.Tensor
    source_index: np.ndarray | tf.Tensor
    canvas_shape: np.ndarray | tf.Tensor
    heights: np.ndarray | tf.Tensor
    widths: np.ndarray | tf.Tensor


def _check_sizes(sizes: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Validate ``[(H, W)]`` (ints >= 1, at least one example) and return it as Python ints."""
    if len(sizes) == 0:
        raise ValueError("cannot plan an empty batch: sizes is empty")
    try:
        array = np.asarray(sizes)
    except ValueError as error:  # ragged nesting
        raise ValueError(f"sizes must be (height, width) pairs of ints: {error}") from None
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"sizes must be (height, width) pairs, got an array of shape "
                         f"{array.shape}")
    if array.dtype.kind not in "iu" or any(
            isinstance(value, (bool, np.bool_)) for size in sizes for value in size):
        raise ValueError(f"sizes must be ints, got dtype {array.dtype} (e.g. {sizes[0]!r})")
    if array.min() < 1:
        position = int(np.argmin(array.min(axis=1)))
        raise ValueError(f"example {position} has size {tuple(array[position].tolist())}: "
                         "heights and widths must be >= 1 (zero-size example)")
    return [tuple(size) for size in array.tolist()]


def _check_limit(value: int | None, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int or None, got {value!r}")
    return int(value)


def _check_step(value: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"height_step must be a positive int, got {value!r}")
    return int(value)


def _bucket_height(height: int, step: int) -> int:
    """``height`` rounded up to a multiple of ``step``."""
    return -(-height // step) * step


def _fill_rows(sizes: list[tuple[int, int]], row_width: int,
               height_step: int = 1) -> list[tuple[int, list[int]]]:
    """Greedy row filling: ``[(height, [example indices left to right]), ...]``.

    Examples are bucketed by their height rounded up to a multiple of ``height_step``; buckets
    are taken tallest first; inside a bucket a row starts with the widest remaining example and
    then repeatedly takes the widest one whose width plus one separator pixel still fits. Equal
    widths go in original order (smallest index first). A row's height is its tallest member's
    (at most the bucket height; the bucket height itself with ``height_step == 1``). The rows are
    returned tallest first (stable), the order first-fit *decreasing* stacks them in.
    """
    buckets: dict[int, list[tuple[int, int]]] = {}
    for index, (height, width) in enumerate(sizes):
        buckets.setdefault(_bucket_height(height, height_step), []).append((width, -index))
    rows = []
    for bucket in sorted(buckets, reverse=True):
        keys = sorted(buckets[bucket])  # ascending width; among equal widths, larger index first
        widths = [width for width, _ in keys]
        while keys:
            width, negative_index = keys.pop()
            widths.pop()
            row = [-negative_index]
            free = row_width - width
            while keys and free >= 2:  # a further example needs >= 1 pixel + 1 separator
                position = bisect.bisect_right(widths, free - 1) - 1
                if position < 0:
                    break
                width, negative_index = keys.pop(position)
                widths.pop(position)
                row.append(-negative_index)
                free -= width + 1
            rows.append((max(sizes[index][0] for index in row), row))
    if height_step > 1:  # rows of one bucket may differ in height: restore decreasing order
        rows.sort(key=lambda row: -row[0])
    return rows


def _first_fit(heights: list[int], limit: int) -> tuple[list[list[int]], int]:
    """Stack rows of the given heights into canvases of at most ``limit`` pixel rows.

    First fit: row ``k`` goes to the lowest-numbered canvas that has room for one separator row
    plus the row (an unused canvas needs no separator). A max-tree over the canvases' free room
    finds that canvas in ``O(log n)``. Returns the row numbers of each canvas (top to bottom) and
    the tallest canvas's used height ``Hc``.
    """
    leaves = 1
    while leaves < len(heights):
        leaves *= 2
    # room[leaves + c]: height the next row of canvas c may have; inner nodes: max of children.
    # Unopened canvases count as open with no room so that room[1] says whether any open one fits.
    room = [-1] * (2 * leaves)
    canvases: list[list[int]] = []
    for row_number, height in enumerate(heights):
        if room[1] < height:  # no open canvas has room: open the next one
            node = leaves + len(canvases)
        else:  # descend to the leftmost open canvas with enough room
            node = 1
            while node < leaves:
                node = 2 * node if room[2 * node] >= height else 2 * node + 1
        canvas = node - leaves
        if canvas == len(canvases):
            canvases.append([])
            room[node] = limit - height - 1
        else:
            room[node] -= height + 1
        canvases[canvas].append(row_number)
        node //= 2
        while node:  # refresh the ancestors' maxima, stopping once one is unchanged
            left, right = room[2 * node], room[2 * node + 1]
            largest = left if left > right else right
            if room[node] == largest:
                break
            room[node] = largest
            node //= 2
    used = min(room[leaves:leaves + len(canvases)])  # limit - used - 1 of the fullest canvas
    return canvases, limit - used - 1


# Canvas-height limits tried when ``max_height`` is None, in multiples of the tallest example.
_AUTO_HEIGHT_FACTORS = (1.0, 1.5, 2.0)


def plan_packing(
    sizes: Sequence[tuple[int, int]],
    max_width: int | None = None,
    max_height: int | None = None,
    height_step: int = 1,
) -> PackingLayout:
    """Plan how to tile examples of the given sizes into canvases (seed Appendix B).

    Pure Python, deterministic (a function of ``sizes`` and the limits only), a few ms for 1,000
    examples (4 ms word-like, 8 ms line-like on this project's CPU).

    Args:
      sizes: ``[(H_i, W_i)]`` example sizes in pixels, ints ``>= 1``, original batch order.
      max_width: row width to fill, in pixels. ``None``: the widest example. An example wider
        than ``max_width`` is never split (an MDLSTM scan cannot be split) and never rejected;
        the effective row width is ``max(max_width, widest)``: the canvas is that wide anyway,
        so every row is filled up to it. Wider rows than the widest example rarely pay off: the
        rows of one height are few, and the skew triangle grows with the canvas.
      max_height: pixel rows per canvas. Rows (tallest first) are stacked into canvases by first
        fit, one separator row between rows; a row that fits no canvas opens a new one, stacked
        on the batch axis. A value below the tallest example is raised to it.
        ``None`` (default): the limit among ``(1, 1.5, 2) x`` the tallest example's height
        whose layout computes the fewest skewed cells ``R * Hc * (Wc + Hc - 1)`` (ties: the
        lowest). The canvas cannot be lower than the tallest example, and a taller one pays
        ``Hc * (Hc - 1)`` skew-triangle cells per canvas and lengthens the scan to
        ``Wc + Hc - 1`` steps, so the limit stays close to the tallest example (words: almost
        always 1x); rows much lower than the tallest (long lines of varying height) can fill a
        1.5-2x canvas with less slack. One unbounded canvas would be far worse: its skew
        triangle grows quadratically with the number of rows.
      height_step: bucket the examples by their height rounded *up* to a multiple of
        ``height_step`` instead of by their exact height. ``1`` (default): Wenniger et al. 2019's
        exact-height buckets. Why: word images have many distinct heights (a 48-word batch
        ~17), so exact-height buckets leave most rows and canvases half empty; coarser buckets
        give fewer, fuller rows (docs/lab/packing.md: a waste factor of ~2.7 -> ~1.6 at 200
        words with 8). Cost: a row is as tall as its tallest member, so every shorter example
        of the row leaves invalid (mask ``False``) cells below it that the scan still computes.
        Exactness is unaffected: the MDLSTM zeroes its states on invalid cells, every
        :class:`Placement` keeps the example's real size, and :func:`pack` marks only real
        example pixels valid. Separators are unchanged.
    Returns:
      The :class:`PackingLayout`; ``canvas_width`` / ``canvas_height`` are the widest row and the
      tallest canvas actually used, never above the effective limits.
    Raises:
      ValueError: empty ``sizes``, a size that is not a pair of ints ``>= 1``, or a limit or
        ``height_step`` that is not a positive int.
    """
    sizes = _check_sizes(sizes)
    max_width = _check_limit(max_width, "max_width")
    max_height = _check_limit(max_height, "max_height")
    height_step = _check_step(height_step)
    row_width = max(max_width or 0, max(width for _, width in sizes))
    tallest = max(height for height, _ in sizes)

    rows = _fill_rows(sizes, row_width, height_step)  # tallest first: first-fit *decreasing* order
    canvas_width = max(sum(sizes[index][1] + 1 for index in members) - 1 for _, members in rows)
    row_heights = [height for height, _ in rows]
    if max_height is None:
        limits = sorted({int(tallest * factor) for factor in _AUTO_HEIGHT_FACTORS})
    else:
        limits = [max(max_height, tallest)]
    best = None
    for limit in limits:
        canvas_rows, canvas_height = _first_fit(row_heights, limit)
        cells = len(canvas_rows) * canvas_height * (canvas_width + canvas_height - 1)
        if best is None or cells < best[0]:
            best = (cells, canvas_rows, canvas_height)
    _, canvas_rows, canvas_height = best

    placements: list[Placement | None] = [None] * len(sizes)
    for canvas, row_numbers in enumerate(canvas_rows):
        y = 0
        for row_in_canvas, row_number in enumerate(row_numbers):
            height, members = rows[row_number]
            x = 0
            for index in members:  # each example keeps its real size, at the top of its row
                example_height, width = sizes[index]
                placements[index] = Placement(index, canvas, row_in_canvas, y, x,
                                              example_height, width)
                x += width + 1
            y += height + 1
    return PackingLayout(
        placements=tuple(placements),
        num_canvases=len(canvas_rows),
        canvas_height=canvas_height,
        canvas_width=canvas_width,
    )


def plan_padding(sizes: Sequence[tuple[int, int]]) -> PackingLayout:
    """The LMBR baseline as a layout: example ``i`` alone at the top left of canvas ``i``.

    Canvases are ``max(H_i) x max(W_i)``; this is what :func:`pad_batch` builds, so
    ``plan_padding(sizes).computed_cells()`` is the padded scan's cost, comparable with a
    packing layout's.
    """
    sizes = _check_sizes(sizes)
    placements = tuple(Placement(i, i, 0, 0, 0, h, w) for i, (h, w) in enumerate(sizes))
    return PackingLayout(
        placements=placements,
        num_canvases=len(sizes),
        canvas_height=max(h for h, _ in sizes),
        canvas_width=max(w for _, w in sizes),
    )


def image_sizes(images: Images) -> list[tuple[int, int]]:
    """Static per-example ``(H, W)`` of a ragged batch or a list of ``[H, W, C]`` tensors.

    Works wherever the sizes are concrete: always in eager mode, and inside ``tf.function`` for a
    list of tensors with fully known static shapes. Inside ``tf.function`` a ragged tensor's row
    lengths are symbolic, so this raises ``ValueError``; use :func:`pack_ragged_graph` (packing)
    or :func:`pad_batch` with :func:`image_sizes_tensor` (padding) there.
    """
    if isinstance(images, tf.RaggedTensor):
        _check_ragged(images)
        if not tf.executing_eagerly():
            raise ValueError(
                "image_sizes needs concrete sizes, but a RaggedTensor's row lengths are symbolic "
                "inside tf.function; use pack_ragged_graph or image_sizes_tensor there")
        heights, row_widths = _ragged_lengths(images)
        widths = _example_widths(heights.numpy(), row_widths.numpy())
        return [(int(h), int(w)) for h, w in zip(heights.numpy(), widths)]
    tensors = _check_list(images)
    sizes = []
    for position, tensor in enumerate(tensors):
        height, width = tensor.shape[0], tensor.shape[1]
        if height is None or width is None:
            raise ValueError(f"example {position}: static shape {tensor.shape} has unknown height "
                             "or width; sizes must be known to plan a layout")
        sizes.append((height, width))
    return sizes


def image_sizes_tensor(images: Images) -> tf.Tensor:
    """Per-example ``(H, W)`` as an int64 ``[B, 2]`` tensor; graph-safe (works in tf.function)."""
    if isinstance(images, tf.RaggedTensor):
        _check_ragged(images)
        return _sizes_of_lengths(*_ragged_lengths(images))
    tensors = _check_list(images)
    return tf.cast(tf.stack([tf.shape(t)[:2] for t in tensors]), tf.int64)


@tf.function(input_signature=[tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.int64)], autograph=False)
def _sizes_of_lengths(heights: tf.Tensor, row_widths: tf.Tensor) -> tf.Tensor:
    """``(H, W)`` int64 ``[B, 2]`` of the ``heights [B]`` and ``row_widths [sum H]`` of a ragged
    batch (an empty example: ``(0, 0)``); one ``tf.function`` per process, so that the layers of
    every traced model call it rather than building its ragged checks again."""
    widths = tf.reduce_max(tf.RaggedTensor.from_row_lengths(row_widths, heights), axis=1)
    return tf.stack([heights, tf.maximum(widths, 0)], axis=1)


def _check_ragged(images: tf.RaggedTensor) -> None:
    if images.shape.rank != 4:
        raise ValueError(f"expected a ragged [B, (H), (W), C] batch, got shape {images.shape}")
    if images.shape[-1] is None:
        raise ValueError("the channel dimension of the ragged batch must be static")


def _check_list(images: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    if isinstance(images, tf.Tensor) or not isinstance(images, Sequence):
        raise ValueError("images must be a tf.RaggedTensor [B, (H), (W), C] or a list of "
                         f"[H, W, C] tensors, got {type(images).__name__}")
    tensors = [tf.convert_to_tensor(t) for t in images]
    if not tensors:
        raise ValueError("cannot pack an empty batch")
    channels = tensors[0].shape[-1] if tensors[0].shape.rank == 3 else None
    for position, tensor in enumerate(tensors):
        if tensor.shape.rank != 3:
            raise ValueError(f"example {position}: expected [H, W, C], got shape {tensor.shape}")
        if tensor.shape[-1] is None or tensor.shape[-1] != channels:
            raise ValueError(f"example {position}: {tensor.shape[-1]} channels, expected "
                             f"{channels} (all examples need the same static channel count)")
    return tensors


def _ragged_lengths(images: tf.RaggedTensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``(heights [B], row widths [sum H])`` int64 of a ragged ``[B, (H), (W), C]`` batch."""
    heights = tf.cast(images.row_lengths(), tf.int64)
    if images.ragged_rank == 1:  # uniform width: values is [sum H, W, C]
        width = tf.shape(images.values, out_type=tf.int64)[1]
        row_widths = tf.fill(tf.shape(images.values, out_type=tf.int64)[:1], width)
    else:
        row_widths = tf.cast(images.values.row_lengths(), tf.int64)
    return heights, row_widths


def _example_widths(heights: np.ndarray, row_widths: np.ndarray) -> np.ndarray:
    """Width per example from its row widths; ``ValueError`` if rows of one example differ."""
    starts = np.cumsum(heights) - heights
    widths = np.zeros(len(heights), np.int64)
    nonempty = heights > 0
    widths[nonempty] = row_widths[starts[nonempty]]
    if not np.array_equal(np.repeat(widths, heights), row_widths):
        raise ValueError("every row of an example must have the same width "
                         "(a ragged image batch is [B, (H), (W), C] with one W per example)")
    return widths


def _flat_pixels(images: Images) -> tf.Tensor:
    """All example pixels as ``[N, C]`` in ragged flat-value order (example-major, row-major)."""
    if isinstance(images, tf.RaggedTensor):
        _check_ragged(images)
        return tf.reshape(images.flat_values, [-1, images.shape[-1]])
    tensors = _check_list(images)
    channels = tensors[0].shape[-1]
    return tf.concat([tf.reshape(t, [-1, channels]) for t in tensors], axis=0)


def _layout_indices(layout: PackingLayout) -> PackingIndices:
    """NumPy :class:`PackingIndices` of a static layout (see there for the fields)."""
    table = np.array([(p.canvas, p.y, p.x, p.height, p.width) for p in layout.placements],
                     dtype=np.int64).reshape(-1, 5)
    canvas, y, x, heights, widths = table.T
    # per example pixel row: its canvas position minus its position in the flat pixel order
    example = np.repeat(np.arange(len(heights)), heights)
    row = np.arange(len(example)) - np.repeat(np.cumsum(heights) - heights, heights)
    row_width = widths[example]
    shift = ((canvas[example] * layout.canvas_height + y[example] + row) * layout.canvas_width
             + x[example] - (np.cumsum(row_width) - row_width))
    positions = np.arange(row_width.sum())
    pixel_index = np.repeat(shift, row_width) + positions
    canvas_shape = np.array([layout.num_canvases, layout.canvas_height, layout.canvas_width],
                            np.int64)
    source_index = np.full(int(canvas_shape.prod()), len(positions), np.int64)
    source_index[pixel_index] = positions
    return PackingIndices(pixel_index, source_index, canvas_shape, heights, widths)


@tf.custom_gradient
def _move_pixels(values: tf.Tensor, index: tf.Tensor, adjoint_index: tf.Tensor) -> tf.Tensor:
    """``out[k] = values[index[k]]``, where ``index[k] == len(values)`` gives a zero row.

    ``adjoint_index`` is the inverse map (``adjoint_index[j]`` = the ``k`` with
    ``index[k] == j``, or ``len(index)`` if none), so the gradient is another such move, not a
    scatter: pack and unpack are both plain gathers forward and backward.
    """
    padded = tf.concat([values, tf.zeros_like(values[:1])], axis=0)

    def grad(upstream: tf.Tensor | tf.IndexedSlices) -> tuple[tf.Tensor, None, None]:
        # A gather downstream (e.g. ``RaggedTensor.to_tensor``) sends IndexedSlices: make them dense.
        return _move_pixels(tf.convert_to_tensor(upstream), adjoint_index, index), None, None

    return tf.gather(padded, index), grad


def _canvas_from_pixels(pixels: tf.Tensor, indices: PackingIndices) -> tf.Tensor:
    """``[N, C]`` pixels -> ``[R, Hc, Wc, C]`` canvas, zeros off the examples."""
    flat = _move_pixels(pixels, tf.convert_to_tensor(indices.source_index, tf.int64),
                        tf.convert_to_tensor(indices.pixel_index, tf.int64))
    channels = pixels.shape[-1]
    if isinstance(indices.canvas_shape, np.ndarray):  # static layout: static result shape
        shape = [*indices.canvas_shape.tolist(), channels]
    else:
        shape = tf.concat([indices.canvas_shape, tf.constant([channels], tf.int64)], axis=0)
    return tf.reshape(flat, shape)


def _pixels_from_canvas(canvas_outputs: tf.Tensor, indices: PackingIndices) -> tf.Tensor:
    """``[R, Hc, Wc, D]`` -> ``[N, D]`` example pixels in ragged flat-value order."""
    depth = canvas_outputs.shape[-1]
    if depth is None:
        depth = tf.shape(canvas_outputs)[-1]
    flat = tf.reshape(canvas_outputs, [-1, depth])
    return _move_pixels(flat, tf.convert_to_tensor(indices.pixel_index, tf.int64),
                        tf.convert_to_tensor(indices.source_index, tf.int64))


def pack(images: Images, layout: PackingLayout) -> tuple[tf.Tensor, tf.Tensor]:
    """Tile a batch into canvases following a static layout.

    Works in eager mode and inside ``tf.function`` (``layout`` is a Python constant of the trace).
    Differentiable with respect to ``images``: forward and backward are one gather each.

    Args:
      images: ragged ``[B, (H), (W), C]`` or a list of ``B`` ``[H_i, W_i, C]`` tensors whose sizes
        are those ``layout`` was planned for (checked where they are known; for a ragged batch
        inside ``tf.function``, by a run-time assertion).
      layout: from :func:`plan_packing` (or :func:`plan_padding`).
    Returns:
      ``(canvas, mask)``: ``canvas`` ``[R, Hc, Wc, C]`` of the images' dtype, zeros outside the
      examples; ``mask`` bool ``[R, Hc, Wc]``, ``True`` exactly on example pixels.
    Raises:
      ValueError: bad input rank / channels, or sizes that differ from the layout's.
    """
    indices = _layout_indices(layout)
    if isinstance(images, tf.RaggedTensor) and not tf.executing_eagerly():
        _check_ragged(images)
        actual_heights, actual_row_widths = _ragged_lengths(images)
        pixels = _flat_pixels(images)
        with tf.control_dependencies([
                tf.debugging.assert_equal(actual_heights, indices.heights,
                                          message="ragged heights differ from the layout's"),
                tf.debugging.assert_equal(actual_row_widths,
                                          np.repeat(indices.widths, indices.heights),
                                          message="ragged widths differ from the layout's")]):
            pixels = tf.identity(pixels)
    else:
        actual = image_sizes(images)
        planned = list(zip(indices.heights.tolist(), indices.widths.tolist()))
        if actual != planned:
            raise ValueError(f"image sizes {actual} differ from the layout's sizes {planned}")
        pixels = _flat_pixels(images)
    mask = (indices.source_index < len(indices.pixel_index)).reshape(indices.canvas_shape)
    return _canvas_from_pixels(pixels, indices), tf.constant(mask)


def unpack(canvas_outputs: tf.Tensor, layout: PackingLayout | PackingIndices) -> tf.RaggedTensor:
    """Cut every example back out of per-pixel canvas outputs (the inverse of :func:`pack`).

    Args:
      canvas_outputs: ``[R, Hc, Wc, D]`` outputs computed on the (unskewed) canvases.
      layout: the static :class:`PackingLayout` used to pack, or the :class:`PackingIndices`
        returned by :func:`pack_ragged_graph`.
    Returns:
      Ragged ``[B, (H), (W), D]`` in the original example order, each example its own size.
      Differentiable with respect to ``canvas_outputs`` (separator cells get zero gradient).
    """
    indices = _layout_indices(layout) if isinstance(layout, PackingLayout) else layout
    pixels = _pixels_from_canvas(canvas_outputs, indices)
    heights = tf.convert_to_tensor(indices.heights, tf.int64)
    widths = tf.convert_to_tensor(indices.widths, tf.int64)
    return tf.RaggedTensor.from_nested_row_lengths(
        pixels, [heights, tf.repeat(widths, heights)], validate=False)


def _plan_indices(heights: np.ndarray, row_widths: np.ndarray, max_width: int | None,
                  max_height: int | None, height_step: int = 1) -> PackingIndices:
    """NumPy side of ``pack_ragged_graph(planner="numpy")``: plan and index a batch from its row lengths."""
    widths = _example_widths(heights, row_widths)
    layout = plan_packing(list(zip(heights.tolist(), widths.tolist())), max_width, max_height,
                          height_step)
    return _layout_indices(layout)


def _numpy_planned_indices(heights: tf.Tensor, row_widths: tf.Tensor, max_width: int | None,
                           max_height: int | None, height_step: int) -> PackingIndices:
    """:func:`plan_packing` in ``tf.numpy_function``: the Python planner inside a graph."""
    arrays = tf.numpy_function(
        lambda h, rw: tuple(_plan_indices(h, rw, max_width, max_height, height_step)),
        [heights, row_widths],
        [tf.int64] * len(PackingIndices._fields),
        stateful=False,
        name="plan_packing")
    return PackingIndices(*(tf.ensure_shape(array, shape) for array, shape
                            in zip(arrays, [[None], [None], [3], [None], [None]])))


def _graph_planned_indices(heights: tf.Tensor, row_widths: tf.Tensor, max_width: int | None,
                           max_height: int | None, height_step: int, jit: bool) -> PackingIndices:
    """:func:`~tfnhr.ops.graph_planner.plan_packing_graph` and the index arrays of its layout,
    all in TensorFlow ops (the graph twin of :func:`_layout_indices`)."""
    examples = tf.size(heights, out_type=tf.int64)
    example_of_row = tf.repeat(tf.range(examples), heights)
    widths = tf.math.unsorted_segment_max(row_widths, example_of_row, examples)
    widths = tf.where(heights > 0, widths, 0)
    with tf.control_dependencies([tf.debugging.assert_equal(
            row_widths, tf.gather(widths, example_of_row),
            message="every row of an example must have the same width "
                    "(a ragged image batch is [B, (H), (W), C] with one W per example)")]):
        widths = tf.identity(widths)
    placed = plan_packing_graph(heights, widths, max_width, max_height, height_step, jit=jit)
    canvas_height, canvas_width = placed.canvas_shape[1], placed.canvas_shape[2]
    # per example pixel row: its canvas position minus its position in the flat pixel order
    row = tf.range(tf.size(example_of_row, out_type=tf.int64)) - tf.gather(tf.cumsum(heights, exclusive=True),
                                                                           example_of_row)
    row_width = tf.gather(widths, example_of_row)
    shift = ((tf.gather(placed.canvas, example_of_row) * canvas_height + tf.gather(placed.y, example_of_row)
              + row) * canvas_width + tf.gather(placed.x, example_of_row) - tf.cumsum(row_width, exclusive=True))
    pixel_count = tf.reduce_sum(row_width)
    positions = tf.range(pixel_count)
    pixel_index = tf.repeat(shift, row_width) + positions
    source_index = tf.tensor_scatter_nd_update(
        tf.fill([tf.reduce_prod(placed.canvas_shape)], pixel_count), pixel_index[:, None], positions)
    return PackingIndices(pixel_index, source_index, placed.canvas_shape, heights, widths)


@functools.lru_cache(maxsize=None)
def _graph_planner_function(max_width: int | None, max_height: int | None, height_step: int,
                            jit: bool) -> tf.types.experimental.GenericFunction:
    """:func:`_graph_planned_indices` of one static configuration as a ``tf.function`` of the
    int64 ``heights [B]`` and ``row_widths [sum H]``, made once per process: every layer and every
    model traced in the process calls the same function instead of building the planner's ops
    again (its loops and checks are most of a packed layer's tracing)."""
    return tf.function(
        functools.partial(_graph_planned_indices, max_width=max_width, max_height=max_height,
                          height_step=height_step, jit=jit),
        input_signature=[tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.int64)], autograph=False)


PLANNERS = ("xla", "graph", "numpy")
"""Where :func:`pack_ragged_graph` plans: ``"xla"`` the graph planner compiled with XLA,
``"graph"`` the same in plain TensorFlow ops (portable: what exported models use), ``"numpy"``
:func:`plan_packing` in ``tf.numpy_function`` (the reference; Python-bound)."""


def pack_ragged_graph(
    images: tf.RaggedTensor,
    max_width: int | None = None,
    max_height: int | None = None,
    height_step: int = 1,
    planner: str = "xla",
) -> tuple[tf.Tensor, tf.Tensor, PackingIndices]:
    """Plan and pack a ragged batch whose sizes are only known at run time.

    The layout is :func:`plan_packing`'s (same arguments, same placements), planned by
    ``planner`` (:data:`PLANNERS`): by default in TensorFlow ops compiled with XLA
    (:func:`~tfnhr.ops.graph_planner.plan_packing_graph`), so the whole step stays in the graph
    and a model using it exports to a SavedModel; ``"graph"`` is the same without XLA (what
    ``tfnhr export`` uses, for TF Serving); ``"numpy"`` runs the Python planner in
    ``tf.numpy_function`` (the reference: host Python, no XLA, no export). The data path is the
    same gathers as :func:`pack` / :func:`unpack`, so the result equals the static path's, is
    differentiable, and works in eager mode, ``tf.function`` and ``model.fit`` with every batch
    planned afresh. Planning errors (zero-size example, empty batch) are, in a graph, a run-time
    TensorFlow error (``InvalidArgumentError``) carrying their message.

    Args:
      images: ragged ``[B, (H), (W), C]``, static ``C``.
      max_width, max_height: as in :func:`plan_packing` (Python ints or ``None``).
      height_step: as in :func:`plan_packing` (a Python int; ``1``: exact-height buckets).
      planner: one of :data:`PLANNERS`.
    Returns:
      ``(canvas [R, Hc, Wc, C], mask bool [R, Hc, Wc], indices)``; pass ``indices`` to
      :func:`unpack` to get the ragged ``[B, (H), (W), D]`` per-example outputs back.
    """
    _check_ragged(images)
    max_width = _check_limit(max_width, "max_width")
    max_height = _check_limit(max_height, "max_height")
    height_step = _check_step(height_step)
    if planner not in PLANNERS:
        raise ValueError(f"planner must be one of {PLANNERS}, got {planner!r}")
    heights, row_widths = _ragged_lengths(images)
    if planner == "numpy":
        indices = _numpy_planned_indices(heights, row_widths, max_width, max_height, height_step)
    else:
        plan = _graph_planner_function(max_width, max_height, height_step, jit=planner == "xla")
        indices = PackingIndices(*plan(heights, row_widths))
    canvas = _canvas_from_pixels(_flat_pixels(images), indices)
    canvas = tf.ensure_shape(canvas, [None, None, None, images.shape[-1]])
    pixel_count = tf.size(indices.pixel_index, out_type=tf.int64)
    mask = tf.reshape(indices.source_index < pixel_count, indices.canvas_shape)
    return canvas, mask, indices


def pad_batch(images: Images) -> tuple[tf.Tensor, tf.Tensor]:
    """LMBR baseline: pad every example to the batch's own largest height and width.

    Graph-safe (no planning needed) and differentiable.

    Args:
      images: ragged ``[B, (H), (W), C]`` or a list of ``[H_i, W_i, C]`` tensors.
    Returns:
      ``(padded, mask)``: ``padded`` ``[B, Hmax, Wmax, C]`` with each example at the top left and
      zeros elsewhere; ``mask`` bool ``[B, Hmax, Wmax]``, ``True`` exactly on example pixels.
    """
    if isinstance(images, tf.RaggedTensor):
        _check_ragged(images)
        padded = images.to_tensor()
        ones = tf.ones(tf.shape(images.flat_values)[:-1], tf.bool)
        mask = images.with_flat_values(ones).to_tensor(default_value=False)
        return padded, mask
    tensors = _check_list(images)
    shapes = tf.stack([tf.shape(t)[:2] for t in tensors])
    target = tf.reduce_max(shapes, axis=0)
    padded, masks = [], []
    for tensor, shape in zip(tensors, tf.unstack(shapes)):
        paddings = tf.stack([[0, target[0] - shape[0]], [0, target[1] - shape[1]], [0, 0]])
        padded.append(tf.pad(tensor, paddings))
        masks.append(tf.pad(tf.ones(shape, tf.bool), paddings[:2]))
    return tf.stack(padded), tf.stack(masks)


def unpad_batch(outputs: tf.Tensor, sizes: Sequence[tuple[int, int]] | tf.Tensor
                ) -> tf.RaggedTensor:
    """Inverse of :func:`pad_batch` on per-pixel outputs: cut each example's top-left corner out.

    Args:
      outputs: ``[B, Hp, Wp, D]`` with ``Hp >= max(H_i)``, ``Wp >= max(W_i)``.
      sizes: ``[(H_i, W_i)]`` (e.g. :func:`image_sizes`) or an int ``[B, 2]`` tensor (e.g.
        :func:`image_sizes_tensor`, graph-safe).
    Returns:
      Ragged ``[B, (H), (W), D]``; differentiable with respect to ``outputs``.
    """
    if not isinstance(sizes, tf.Tensor):
        sizes = _check_sizes(sizes)
    sizes = tf.cast(tf.reshape(sizes, [-1, 2]), tf.int64)
    heights, widths = sizes[:, 0], sizes[:, 1]
    return tf.RaggedTensor.from_tensor(outputs, lengths=(heights, tf.repeat(widths, heights)))
