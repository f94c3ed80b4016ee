"""Tests for tfnhr.ops.packing: planner properties, pack/unpack, padding baseline, graph path.

References are independent: layouts are checked by painting them on NumPy grids, packed canvases
against NumPy pastes of the examples, gradients against per-example tapes.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.ragged import ragged_stack
from tfnhr.ops.packing import (
    PLANNERS,
    PackingLayout,
    Placement,
    image_sizes,
    image_sizes_tensor,
    pack,
    pack_ragged_graph,
    pad_batch,
    plan_packing,
    plan_padding,
    unpack,
    unpad_batch,
)

SIZES = st.lists(st.tuples(st.integers(1, 9), st.integers(1, 24)), min_size=1, max_size=30)
LIMIT = st.one_of(st.none(), st.integers(1, 50))
STEP = st.sampled_from([1, 3, 8])


def _bucket(height: int, step: int) -> int:
    return -(-height // step) * step


def _images(sizes, channels=2, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(h, w, channels)).astype(dtype) for h, w in sizes]


def _paint(layout: PackingLayout) -> np.ndarray:
    """``[R, Hc, Wc]`` grid of example ids (-1 = free); asserts nothing is painted twice."""
    grid = np.full((layout.num_canvases, layout.canvas_height, layout.canvas_width), -1)
    for p in layout.placements:
        region = grid[p.canvas, p.y:p.y + p.height, p.x:p.x + p.width]
        assert region.shape == (p.height, p.width), f"example {p.index} leaves the canvas"
        assert (region == -1).all(), f"example {p.index} overlaps another"
        region[...] = p.index
    return grid


def _rows(layout: PackingLayout) -> dict[tuple[int, int], list]:
    rows: dict[tuple[int, int], list] = {}
    for p in layout.placements:
        rows.setdefault((p.canvas, p.row), []).append(p)
    return {key: sorted(members, key=lambda p: p.x) for key, members in rows.items()}


# ----------------------------------------------------------------------------- planner


@settings(max_examples=150, deadline=None)
@given(SIZES, LIMIT, LIMIT, STEP)
def test_plan_properties(sizes, max_width, max_height, height_step):
    layout = plan_packing(sizes, max_width=max_width, max_height=max_height,
                          height_step=height_step)
    row_limit = max([max_width or 0] + [w for _, w in sizes])
    tallest = max(h for h, _ in sizes)
    # None: the planner picks a limit of at most twice the tallest example
    height_limit = 2 * tallest if max_height is None else max(max_height, tallest)

    # every example exactly once, with its own size, in original order
    assert [p.index for p in layout.placements] == list(range(len(sizes)))
    assert [(p.height, p.width) for p in layout.placements] == [tuple(s) for s in sizes]
    assert all(0 <= p.canvas < layout.num_canvases for p in layout.placements)

    # no overlap, inside the canvases, and no two examples 4-adjacent
    grid = _paint(layout)
    for a, b in ((grid[:, 1:, :], grid[:, :-1, :]), (grid[:, :, 1:], grid[:, :, :-1])):
        touching = (a >= 0) & (b >= 0) & (a != b)
        assert not touching.any(), "two examples touch: a separator is missing"
    assert layout.valid_cells() == int((grid >= 0).sum())

    # rows: one height bucket (heights rounded up to a multiple of height_step; 1: one height),
    # separator pixel between neighbours, separator row under the row's tallest example
    rows = _rows(layout)
    for members in rows.values():
        assert len({_bucket(p.height, height_step) for p in members}) == 1
        assert len({p.y for p in members}) == 1
        assert members[0].x == 0
        for left, right in zip(members, members[1:]):
            assert right.x == left.x + left.width + 1
        assert members[-1].x + members[-1].width <= row_limit
    for canvas in range(layout.num_canvases):
        stack = [rows[(canvas, r)][0] for r in range(sum(c == canvas for c, _ in rows))]
        assert stack[0].y == 0
        heights = [max(p.height for p in rows[(canvas, r)]) for r in range(len(stack))]
        for upper, lower, height in zip(stack, stack[1:], heights):
            assert lower.y == upper.y + height + 1
        assert stack[-1].y + heights[-1] <= height_limit

    # the canvas is exactly as large as its widest row and tallest stack of rows
    used = grid >= 0
    assert used.any(axis=(0, 1))[-1] and used.any(axis=(0, 2))[-1]


@settings(max_examples=100, deadline=None)
@given(SIZES, LIMIT, STEP)
def test_plan_is_greedy_widest_first(sizes, max_width, height_step):
    """Per height, rows in creation order: each row starts with the widest remaining example,
    then repeatedly takes the widest one that still fits (width + 1 separator), and closes only
    when no remaining example fits."""
    layout = plan_packing(sizes, max_width=max_width, height_step=height_step)
    row_limit = max([max_width or 0] + [w for _, w in sizes])
    by_height: dict[int, list] = {}
    for members in _rows(layout).values():
        by_height.setdefault(_bucket(members[0].height, height_step), []).append(members)
    for height, rows in by_height.items():
        remaining = sorted(w for h, w in sizes if _bucket(h, height_step) == height)
        # creation order: widest first example first; equal widths go by original index
        for members in sorted(rows, key=lambda m: (-m[0].width, m[0].index)):
            free = row_limit + 1  # as if a separator preceded the first example
            for p in members:
                fitting = [w for w in remaining if w + 1 <= free]
                assert fitting and p.width == max(fitting)
                remaining.remove(p.width)
                free -= p.width + 1
            assert not [w for w in remaining if w + 1 <= free], "row closed too early"
        assert not remaining


@settings(max_examples=50, deadline=None)
@given(SIZES, LIMIT, LIMIT, STEP)
def test_plan_is_deterministic(sizes, max_width, max_height, height_step):
    first = plan_packing(sizes, max_width, max_height, height_step)
    assert plan_packing(list(sizes), max_width, max_height, height_step) == first
    assert plan_packing(np.array(sizes, np.int32), max_width, max_height, height_step) == first


def test_plan_small_example_by_hand():
    sizes = [(2, 3), (4, 5), (2, 6), (2, 2), (4, 1)]
    # Row width 6 (widest). Rows: h4 [5] (free 1: nothing fits with a separator), h4 [1],
    # h2 [6], h2 [3, 2]. Tallest 4: canvases of 4 rows hold one row each, 4 * 4 * (6 + 3) = 144
    # cells; limit 6 puts the two [3, 2] row under [6]: 3 * 5 * 10 = 150; limit 8: 2 * 7 * 12.
    assert plan_packing(sizes) == PackingLayout(
        placements=(Placement(0, 3, 0, 0, 0, 2, 3), Placement(1, 0, 0, 0, 0, 4, 5),
                    Placement(2, 2, 0, 0, 0, 2, 6), Placement(3, 3, 0, 0, 4, 2, 2),
                    Placement(4, 1, 0, 0, 0, 4, 1)),
        num_canvases=4, canvas_height=4, canvas_width=6)
    assert plan_packing(sizes, max_height=6) == PackingLayout(
        placements=(Placement(0, 2, 1, 3, 0, 2, 3), Placement(1, 0, 0, 0, 0, 4, 5),
                    Placement(2, 2, 0, 0, 0, 2, 6), Placement(3, 2, 1, 3, 4, 2, 2),
                    Placement(4, 1, 0, 0, 0, 4, 1)),
        num_canvases=3, canvas_height=5, canvas_width=6)


def test_oversize_example_widens_rows():
    """An example wider than max_width is kept whole; every row may then use its width."""
    layout = plan_packing([(2, 10), (2, 3), (2, 3), (2, 3)], max_width=5)
    assert layout.canvas_width == 10
    # rows: [10]; [3, 3] (3 + 1 + 3 = 7, a third would need 11 > 10); [3]
    assert [(p.canvas, p.x) for p in layout.placements] == [(0, 0), (1, 0), (1, 4), (2, 0)]


def test_max_height_splits_into_canvases():
    sizes = [(3, 4)] * 6
    assert plan_packing(sizes, max_height=3).num_canvases == 6
    stacked = plan_packing(sizes, max_height=7)  # 3 + 1 + 3
    assert (stacked.num_canvases, stacked.canvas_height) == (3, 7)
    raised = plan_packing([(5, 2)], max_height=2)  # a limit below the tallest is raised to it
    assert (raised.num_canvases, raised.canvas_height) == (1, 5)


def test_default_max_height_minimises_cells():
    rng = np.random.default_rng(3)
    for _ in range(5):
        sizes = [(int(h), int(w)) for h, w in zip(rng.integers(10, 40, 60),
                                                    rng.integers(200, 300, 60))]
        tallest = max(h for h, _ in sizes)
        default = plan_packing(sizes).computed_cells()
        for factor in (1, 1.5, 2):
            assert default <= plan_packing(sizes, max_height=int(tallest * factor)).computed_cells()


@pytest.mark.parametrize("sizes, match", [
    ([], "empty"),
    ([(3, 0)], "zero-size"),
    ([(0, 2), (1, 1)], "zero-size"),
    ([(2, 2.0)], "int"),
    ([(True, 2)], "int"),
    ([(2, 3, 1)], "pairs"),
    ([(2, 3), (4,)], "pairs"),
])
def test_plan_rejects_bad_sizes(sizes, match):
    with pytest.raises(ValueError, match=match):
        plan_packing(sizes)


@pytest.mark.parametrize("limits", [{"max_width": 0}, {"max_height": -1}, {"max_width": 2.5}])
def test_plan_rejects_bad_limits(limits):
    with pytest.raises(ValueError, match="positive int"):
        plan_packing([(1, 1)], **limits)


@pytest.mark.parametrize("height_step", [0, -8, 2.0, True, None, "8"])
def test_plan_rejects_bad_height_step(height_step):
    with pytest.raises(ValueError, match="height_step must be a positive int"):
        plan_packing([(1, 1)], height_step=height_step)
    with pytest.raises(ValueError, match="height_step must be a positive int"):
        pack_ragged_graph(ragged_stack(_images([(1, 1)])), height_step=height_step)


def test_height_step_lowers_waste_on_words_like_sizes():
    """Words have many distinct heights: rounding them up to multiples of 8 for bucketing
    gives fewer, fuller rows, so fewer computed cells per valid cell."""
    rng = np.random.default_rng(3)
    sizes = [(int(h), int(w)) for h, w in zip(
        np.clip(rng.normal(64, 20, 200), 16, 160).astype(int),
        np.clip(rng.lognormal(np.log(150), 0.7, 200), 16, 1200).astype(int))]
    exact, coarse = plan_packing(sizes), plan_packing(sizes, height_step=8)
    assert coarse.valid_cells() == exact.valid_cells() == sum(h * w for h, w in sizes)
    waste = {}
    for name, layout in (("exact", exact), ("coarse", coarse)):
        grid = _paint(layout)  # also checks no overlap / inside the canvases
        assert int((grid >= 0).sum()) == layout.valid_cells()
        r, hc, wc = layout.num_canvases, layout.canvas_height, layout.canvas_width
        waste[name] = r * hc * (wc + hc - 1) / layout.valid_cells()
        assert waste[name] == layout.computed_cells() / layout.valid_cells()
    assert waste["coarse"] < 0.8 * waste["exact"], waste


def test_waste_factor_words_like():
    """Packing a words-like batch computes far fewer skewed cells than LMBR padding."""
    rng = np.random.default_rng(7)
    sizes = [(int(h), int(w)) for h, w in zip(
        np.clip(rng.normal(64, 20, 200), 16, 160).astype(int),
        np.clip(rng.lognormal(np.log(150), 0.7, 200), 16, 1200).astype(int))]
    packed, padded = plan_packing(sizes), plan_padding(sizes)
    assert packed.valid_cells() == padded.valid_cells() == sum(h * w for h, w in sizes)
    hmax, wmax = max(h for h, _ in sizes), max(w for _, w in sizes)
    assert padded.computed_cells() == len(sizes) * hmax * (wmax + hmax - 1)
    r, hc, wc = packed.num_canvases, packed.canvas_height, packed.canvas_width
    assert packed.computed_cells() == r * hc * (wc + hc - 1)
    assert packed.computed_cells() < 0.4 * padded.computed_cells()


# ----------------------------------------------------------------------------- pack / unpack


def _reference_canvas(images, layout):
    canvas = np.zeros((layout.num_canvases, layout.canvas_height, layout.canvas_width,
                       images[0].shape[-1]), images[0].dtype)
    mask = np.zeros(canvas.shape[:3], bool)
    for p, image in zip(layout.placements, images):
        canvas[p.canvas, p.y:p.y + p.height, p.x:p.x + p.width] = image
        mask[p.canvas, p.y:p.y + p.height, p.x:p.x + p.width] = True
    return canvas, mask


@settings(max_examples=15, deadline=None)
@given(SIZES, LIMIT, st.sampled_from([np.float32, np.float16, np.int32]), STEP)
def test_pack_unpack_round_trip(sizes, max_height, dtype, height_step):
    images = _images(sizes, channels=3, dtype=dtype)
    layout = plan_packing(sizes, max_height=max_height, height_step=height_step)
    expected_canvas, expected_mask = _reference_canvas(images, layout)
    # the mask is the union of the real example rectangles, not of the rows
    np.testing.assert_array_equal(expected_mask, _paint(layout) >= 0)
    for batch in (images, ragged_stack(images)):
        canvas, mask = pack(batch, layout)
        assert canvas.dtype == dtype and mask.dtype == tf.bool
        np.testing.assert_array_equal(canvas, expected_canvas)
        np.testing.assert_array_equal(mask, expected_mask)
        back = unpack(canvas, layout)
        assert back.shape.as_list() == [len(sizes), None, None, 3]
        assert image_sizes(back) == [tuple(s) for s in sizes]
        np.testing.assert_array_equal(
            back.flat_values, np.concatenate([x.reshape(-1, 3) for x in images]))


def test_pack_uniform_width_ragged():
    """A ragged batch with ragged_rank 1 (uniform width) packs like the list."""
    images = _images([(2, 4), (3, 4), (1, 4)])
    ragged = tf.RaggedTensor.from_row_lengths(np.concatenate(images), [2, 3, 1])
    assert ragged.ragged_rank == 1
    layout = plan_packing(image_sizes(ragged))
    np.testing.assert_array_equal(pack(ragged, layout)[0], pack(images, layout)[0])


def test_gradients_match_per_example():
    sizes = [(3, 5), (2, 7), (3, 2), (1, 1), (4, 3), (2, 2), (3, 6)]
    images = [tf.constant(x) for x in _images(sizes, channels=3, seed=1)]
    weights = tf.constant(np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32))
    targets = [tf.constant(x) for x in _images(sizes, channels=4, seed=3)]

    def per_pixel(x):  # any per-pixel map: packing must not change its per-example results
        return tf.tanh(tf.tensordot(x, weights, 1))

    layout = plan_packing(sizes, max_height=5)
    with tf.GradientTape() as tape:
        tape.watch(images)
        tape.watch(weights)
        canvas, _ = pack(images, layout)
        outputs = unpack(per_pixel(canvas), layout)
        loss = sum(tf.reduce_sum((outputs[i] - t) ** 2) for i, t in enumerate(targets))
    packed = tape.gradient(loss, images + [weights])

    reference = []
    weight_grad = tf.zeros_like(weights)
    for image, target in zip(images, targets):
        with tf.GradientTape() as tape:
            tape.watch(image)
            tape.watch(weights)
            loss_i = tf.reduce_sum((per_pixel(image) - target) ** 2)
        grad_image, grad_weights = tape.gradient(loss_i, [image, weights])
        reference.append(grad_image)
        weight_grad += grad_weights
    for got, want in zip(packed, reference + [weight_grad]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_pack_rejects_bad_input():
    layout = plan_packing([(2, 3)])
    with pytest.raises(ValueError, match="differ"):
        pack([tf.zeros([3, 2, 1])], layout)
    with pytest.raises(ValueError, match=r"\[H, W, C\]"):
        pack([tf.zeros([2, 3])], layout)
    with pytest.raises(ValueError, match="channels"):
        pack([tf.zeros([2, 3, 1]), tf.zeros([2, 3, 2])], plan_packing([(2, 3), (2, 3)]))
    with pytest.raises(ValueError, match="empty"):
        pack([], layout)
    with pytest.raises(ValueError, match="RaggedTensor"):
        pack(tf.zeros([1, 2, 3, 1]), layout)


def test_pack_static_layout_inside_tf_function():
    sizes = [(2, 3), (3, 1), (2, 2)]
    images = _images(sizes)
    layout = plan_packing(sizes)

    @tf.function
    def run(batch):
        canvas, mask = pack(batch, layout)
        return unpack(canvas * 2.0, layout), canvas, mask

    back, canvas, mask = run(ragged_stack(images))
    expected_canvas, expected_mask = _reference_canvas(images, layout)
    np.testing.assert_array_equal(canvas, expected_canvas)
    np.testing.assert_array_equal(mask, expected_mask)
    np.testing.assert_array_equal(back.flat_values, 2.0 * ragged_stack(images).flat_values)
    with pytest.raises(tf.errors.InvalidArgumentError, match="differ from the layout"):
        run(ragged_stack(_images([(3, 2), (2, 1), (2, 2)])))


# ----------------------------------------------------------------------------- graph path


@pytest.mark.parametrize("planner", PLANNERS)
def test_graph_path_equals_static_path_and_does_not_retrace(planner):
    traces = []

    @tf.function(input_signature=[tf.RaggedTensorSpec([None, None, None, 2], tf.float32, 2)])
    def run(batch):
        traces.append(1)
        with tf.GradientTape() as tape:
            tape.watch(batch.flat_values)
            canvas, mask, indices = pack_ragged_graph(batch, max_height=6, planner=planner)
            outputs = unpack(tf.sin(canvas), indices)
            loss = tf.reduce_sum(outputs.flat_values ** 2)
        return canvas, mask, outputs, tape.gradient(loss, batch.flat_values)

    for seed, sizes in enumerate([[(3, 5), (2, 7), (3, 2), (1, 1), (3, 3)],
                                  [(1, 9), (4, 2), (1, 3), (2, 2)]]):
        images = _images(sizes, seed=seed)
        batch = ragged_stack(images)
        canvas, mask, outputs, grad = run(batch)
        layout = plan_packing(sizes, max_height=6)
        static_canvas, static_mask = pack(images, layout)
        np.testing.assert_array_equal(canvas, static_canvas)
        np.testing.assert_array_equal(mask, static_mask)
        eager_canvas, eager_mask, eager_indices = pack_ragged_graph(batch, max_height=6, planner=planner)
        np.testing.assert_array_equal(eager_canvas, static_canvas)
        np.testing.assert_array_equal(eager_mask, static_mask)
        stepped_canvas, stepped_mask, _ = pack_ragged_graph(batch, max_height=6, height_step=3,
                                                            planner=planner)
        stepped = pack(images, plan_packing(sizes, max_height=6, height_step=3))
        np.testing.assert_array_equal(stepped_canvas, stepped[0])
        np.testing.assert_array_equal(stepped_mask, stepped[1])
        np.testing.assert_allclose(outputs.flat_values, np.sin(batch.flat_values), atol=1e-6)
        np.testing.assert_array_equal(outputs.nested_row_lengths()[1],
                                      batch.nested_row_lengths()[1])
        flat = batch.flat_values.numpy()
        np.testing.assert_allclose(grad, 2 * np.sin(flat) * np.cos(flat), rtol=1e-6, atol=1e-6)
    assert len(traces) == 1


@pytest.mark.parametrize("planner", PLANNERS)
def test_graph_path_reports_planning_errors(planner):
    batch = tf.RaggedTensor.from_nested_row_lengths(tf.zeros([2, 1]), [[0, 1], [2]])
    # eager: the NumPy planner's ValueError, or the graph planner's assertion
    with pytest.raises(ValueError if planner == "numpy" else tf.errors.InvalidArgumentError, match="zero-size"):
        pack_ragged_graph(batch, planner=planner)
    with pytest.raises((tf.errors.InvalidArgumentError, tf.errors.UnknownError),
                       match="zero-size"):  # in a graph: a run-time TensorFlow error
        tf.function(pack_ragged_graph)(batch, planner=planner)


def test_graph_path_rejects_rows_of_different_widths():
    batch = tf.RaggedTensor.from_nested_row_lengths(tf.zeros([5, 1]), [[2], [2, 3]])
    for planner in PLANNERS:
        with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match="same width"):
            pack_ragged_graph(batch, planner=planner)
    with pytest.raises(ValueError, match="planner must be one of"):
        pack_ragged_graph(batch, planner="python")


# ----------------------------------------------------------------------------- padding


def test_pad_batch_matches_numpy_and_round_trips():
    sizes = [(3, 5), (1, 7), (4, 2), (2, 2)]
    images = _images(sizes)
    hmax, wmax = 4, 7
    expected = np.zeros((4, hmax, wmax, 2), np.float32)
    expected_mask = np.zeros((4, hmax, wmax), bool)
    for i, x in enumerate(images):
        expected[i, :x.shape[0], :x.shape[1]] = x
        expected_mask[i, :x.shape[0], :x.shape[1]] = True
    for batch in (images, ragged_stack(images)):
        padded, mask = pad_batch(batch)
        np.testing.assert_array_equal(padded, expected)
        np.testing.assert_array_equal(mask, expected_mask)
    # the padding layout describes the same tensor
    np.testing.assert_array_equal(pack(images, plan_padding(sizes))[0], expected)
    back = unpad_batch(tf.constant(expected), sizes)
    np.testing.assert_array_equal(back.flat_values, ragged_stack(images).flat_values)


def test_pad_path_in_tf_function_with_ragged_input():
    sizes = [(3, 5), (1, 7), (4, 2)]
    images = _images(sizes)

    @tf.function(input_signature=[tf.RaggedTensorSpec([None, None, None, 2], tf.float32, 2)])
    def run(batch):
        with tf.GradientTape() as tape:
            tape.watch(batch.flat_values)
            padded, _ = pad_batch(batch)
            outputs = unpad_batch(padded * 3.0, image_sizes_tensor(batch))
            loss = tf.reduce_sum(outputs.flat_values)
        return outputs, tf.convert_to_tensor(tape.gradient(loss, batch.flat_values))

    outputs, grad = run(ragged_stack(images))
    np.testing.assert_array_equal(outputs.flat_values, 3.0 * ragged_stack(images).flat_values)
    np.testing.assert_array_equal(grad, np.full(grad.shape, 3.0))


def test_image_sizes():
    sizes = [(3, 5), (1, 7)]
    images = _images(sizes)
    assert image_sizes(images) == sizes == image_sizes(ragged_stack(images))
    np.testing.assert_array_equal(image_sizes_tensor(ragged_stack(images)), sizes)
    np.testing.assert_array_equal(image_sizes_tensor(images), sizes)

    @tf.function
    def symbolic(batch):
        return image_sizes(batch)

    with pytest.raises(ValueError, match="symbolic"):
        symbolic(ragged_stack(images))
    with pytest.raises(ValueError, match="same width"):
        image_sizes(tf.ragged.constant([[[[1.0], [2.0]], [[3.0]]]], ragged_rank=2))


def test_graph_path_trains_in_model_fit():
    """pack_ragged_graph / unpack inside a Keras model trained by fit on ragged batches."""

    class PerPixel(keras.Model):
        def __init__(self):
            super().__init__()
            self.pixel = keras.layers.Dense(3, activation="tanh")
            self.head = keras.layers.Dense(1)

        def call(self, batch):
            canvas, _, indices = pack_ragged_graph(batch)
            features = unpack(self.pixel(canvas), indices)
            return self.head(tf.reduce_mean(features, axis=[1, 2]))

    rng = np.random.default_rng(0)
    sizes = list(zip(rng.integers(1, 8, 24).tolist(), rng.integers(1, 16, 24).tolist()))
    data = tf.data.Dataset.from_tensor_slices(
        (ragged_stack(_images(sizes)), np.ones((24, 1), np.float32))).batch(6)
    model = PerPixel()
    model.compile(keras.optimizers.Adam(0.05), "mse")
    losses = model.fit(data, epochs=3, shuffle=False, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
