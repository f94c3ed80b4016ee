"""Helpers of benchmarks/training_throughput.py: its FLOP count of an MDLSTM scan against the
shapes of the matmuls the scan really runs, and its parsing of compared batchings."""

from __future__ import annotations

import argparse
import importlib.util
import sys

import pytest
import tensorflow as tf

from tests.helpers.environment import REPO
from tfnhr.layers import MDLSTM2D
from tfnhr.layers.mdlstm_scan import _loop_inputs

BENCHMARKS = REPO / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    """The benchmark script as a module (its folder on sys.path while it loads, for ``_harness``)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("training_throughput", BENCHMARKS / "training_throughput.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


@pytest.mark.parametrize("units, channels", [(10, 6), (50, 20)])
def test_scan_flops_match_the_matmuls_of_the_scan(bench, units, channels):
    """Forward: the loop matmuls (peephole gates and the others, split from 8 units on) plus the
    output-peephole matmul per cell and direction; backward counted as twice the forward."""
    layer = MDLSTM2D(units)
    layer.build((None, None, None, channels))
    x = tf.zeros([1, 3, 4, channels])
    _, _, _, weights, output_peephole = _loop_inputs(x, tf.ones([1, 3, 4]), layer._params(), in_loop=True, split=False)
    assert len(weights) == 2  # split matmuls: no zero block in the count
    per_cell = sum(2 * w.shape[1] * w.shape[2] for w in weights) + 2 * output_peephole.shape[1] * output_peephole.shape[2]
    directions, cells = weights[0].shape[0], 1234
    assert sys.modules["_harness"].scan_flops(units, channels, cells, directions) == pytest.approx(3 * per_cell * cells * directions)


def test_configs_parse_budget_window_planner_and_scan(bench):
    assert bench.parse_configs("150000:1,300000:8,90000,150000:1:numpy,150000:1::ops") == [
        (150000, 1, "xla", "compiled"), (300000, 8, "xla", "compiled"), (90000, 1, "xla", "compiled"),
        (150000, 1, "numpy", "compiled"), (150000, 1, "xla", "ops")]
    for bad in ("150000:1:python", "150000:1:xla:fast", "150000:1:xla:ops:x"):
        with pytest.raises(argparse.ArgumentTypeError, match="BUDGET"):
            bench.parse_configs(bad)
    assert bench.label((150000, 8, "xla", "compiled")) == "150000px/w8"
    assert bench.label((150000, 8, "numpy", "compiled")) == "150000px/w8/numpy"
    assert bench.label((150000, 1, "xla", "ops")) == "150000px/w1/ops"
