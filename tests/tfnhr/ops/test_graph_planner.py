"""The packing planner in TensorFlow ops against the NumPy reference planner.

Reference: :func:`tfnhr.ops.packing.plan_packing` (itself checked by painting its layouts in
``test_packing.py``). The graph planner must give the same placements, field by field, for any
size list, ties included, with and without XLA.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from tfnhr.ops.graph_planner import plan_packing_graph
from tfnhr.ops.packing import plan_packing

TIED_SIZES = st.lists(st.tuples(st.integers(1, 4), st.integers(1, 6)), min_size=1, max_size=40)
VARIED_SIZES = st.lists(st.tuples(st.integers(1, 60), st.integers(1, 300)), min_size=1, max_size=40)
LIMIT = st.one_of(st.none(), st.integers(1, 120))
STEP = st.sampled_from([1, 2, 8])


def _reference(sizes, max_width, max_height, height_step):
    layout = plan_packing(sizes, max_width, max_height, height_step)
    placements = np.array([(p.canvas, p.row, p.y, p.x) for p in layout.placements])
    return placements, (layout.num_canvases, layout.canvas_height, layout.canvas_width)


def _graph(sizes, max_width, max_height, height_step, jit):
    heights, widths = (tf.constant(column, tf.int64) for column in zip(*sizes))
    placed = plan_packing_graph(heights, widths, max_width, max_height, height_step, jit=jit)
    placements = np.stack([placed.canvas, placed.row, placed.y, placed.x], axis=1)
    return placements, tuple(placed.canvas_shape.numpy().tolist())


@settings(max_examples=120, deadline=None)
@given(sizes=st.one_of(TIED_SIZES, VARIED_SIZES), max_width=LIMIT, max_height=LIMIT, height_step=STEP)
def test_graph_planner_equals_numpy_planner(sizes, max_width, max_height, height_step):
    expected, expected_shape = _reference(sizes, max_width, max_height, height_step)
    placements, shape = _graph(sizes, max_width, max_height, height_step, jit=False)
    np.testing.assert_array_equal(placements, expected)
    assert shape == expected_shape


@settings(max_examples=25, deadline=None)
@given(sizes=st.one_of(TIED_SIZES, VARIED_SIZES), max_height=LIMIT, height_step=STEP)
def test_xla_planner_equals_numpy_planner(sizes, max_height, height_step):
    """Under XLA the batch is padded to a power of two with absent examples: same layout."""
    expected, expected_shape = _reference(sizes, None, max_height, height_step)
    placements, shape = _graph(sizes, None, max_height, height_step, jit=True)
    np.testing.assert_array_equal(placements, expected)
    assert shape == expected_shape


def test_word_sized_batch_and_one_trace_for_all_batch_sizes():
    """A 200-word batch (the seed's batch size) in a tf.function of unknown batch size."""
    traces = []

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64)] * 2)
    def plan(heights, widths):
        traces.append(1)
        placed = plan_packing_graph(heights, widths)
        return placed.canvas, placed.row, placed.y, placed.x, placed.canvas_shape

    rng = np.random.default_rng(3)
    for count in (200, 7, 1):
        sizes = list(zip(rng.integers(20, 70, count).tolist(), rng.integers(15, 250, count).tolist()))
        expected, expected_shape = _reference(sizes, None, None, 1)
        *columns, shape = plan(*(tf.constant(column, tf.int64) for column in zip(*sizes)))
        np.testing.assert_array_equal(np.stack(columns, axis=1), expected)
        assert tuple(shape.numpy().tolist()) == expected_shape
    assert len(traces) == 1


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("heights, widths, match", [
    ([], [], "empty batch"),
    ([3, 0], [2, 2], "zero-size"),
    ([3, 2], [2, 0], "zero-size"),
    ([3, 2], [2], "differ in length"),
])
def test_bad_sizes_are_runtime_errors(heights, widths, match, jit):
    with pytest.raises(tf.errors.InvalidArgumentError, match=match):
        plan_packing_graph(tf.constant(heights, tf.int64), tf.constant(widths, tf.int64), jit=jit)
