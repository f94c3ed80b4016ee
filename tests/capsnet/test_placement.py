"""capsnet.placement: the lane cost model, greedy / random / round-robin partitions against brute
force and closed forms, place(), tables, JSON, and the device-speed and lane-cost measurements."""

from __future__ import annotations

import itertools
import time
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from capsnet.lanes import Lane
from capsnet.placement import (
    device_loads,
    format_placement_table,
    greedy_partition,
    lane_cost,
    makespan,
    measure_lane_costs,
    place,
    placement_from_json,
    placement_to_json,
    probe_device_speed,
    random_partition,
    round_robin_partition,
    seconds_per_call,
    training_step,
)
from tests.helpers.environment import LOGICAL_CPUS

CPUS = [f"/device:CPU:{i}" for i in range(LOGICAL_CPUS)]
SEED_SPEEDS = (1.0, 3.1, 4.2, 6.0)  # K80, M40, P100, V100 relative to the K80 (seed §IV-A)


def reference_loads(costs, assignment, speeds) -> np.ndarray:
    """Per-device time, ``[..., devices]``, for one or a stack of assignments ``[..., lanes]``."""
    one_hot = np.eye(len(speeds))[np.asarray(assignment)]
    return (one_hot * np.asarray(costs, float)[:, None]).sum(-2) / np.asarray(speeds, float)


def optimal_makespan(costs, speeds) -> float:
    """Brute force over all ``devices ** lanes`` assignments."""
    every = np.array(list(itertools.product(range(len(speeds)), repeat=len(costs))))
    return float(reference_loads(costs, every, speeds).max(-1).min())


def random_lane_costs(rng: np.random.Generator, n_lanes: int) -> list[float]:
    """Costs of lanes with width and depth uniform in 1..5 (the seed's §VI-E lanes)."""
    return [lane_cost(Lane(int(w), int(d))) for w, d in rng.integers(1, 6, size=(n_lanes, 2))]


def test_lane_cost_is_width_squared_times_depth():
    assert lane_cost(Lane(4, 1)) == 16.0
    assert lane_cost((2, 3)) == 12.0
    assert lane_cost("3x5") == 45.0
    assert lane_cost({"width": 1, "depth": 1}) == 1.0


def test_greedy_equal_speeds_within_grahams_bound_of_the_optimum():
    rng = np.random.default_rng(0)
    worst = 1.0
    for _ in range(200):
        n_lanes, n_devices = int(rng.integers(1, 8)), int(rng.integers(2, 4))
        costs = random_lane_costs(rng, n_lanes) if rng.random() < 0.5 else rng.uniform(0, 10, n_lanes).tolist()
        speeds = [1.0] * n_devices
        assignment = greedy_partition(costs, speeds)
        greedy = makespan(costs, assignment, speeds)
        assert greedy == pytest.approx(reference_loads(costs, assignment, speeds).max())
        optimum = optimal_makespan(costs, speeds)
        assert optimum - 1e-9 <= greedy <= (4 / 3 - 1 / (3 * n_devices)) * optimum + 1e-9
        worst = max(worst, greedy / optimum)
    assert worst > 1.0  # the instances are hard enough that greedy is not always optimal


def test_greedy_mixed_speeds_within_the_uniform_machine_lpt_bound():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n_lanes, n_devices = int(rng.integers(1, 8)), int(rng.integers(2, 4))
        costs = random_lane_costs(rng, n_lanes)
        speeds = rng.choice(SEED_SPEEDS, size=n_devices).tolist()
        greedy = makespan(costs, greedy_partition(costs, speeds), speeds)
        optimum = optimal_makespan(costs, speeds)
        assert optimum - 1e-9 <= greedy <= 2 * n_devices / (n_devices + 1) * optimum + 1e-9


def test_greedy_on_grahams_worst_case():
    # LPT puts 3+2+2 on one device; the optimum is {3, 3} / {2, 2, 2}: ratio 7/6 = 4/3 - 1/6.
    costs, speeds = [3, 3, 2, 2, 2], [1, 1]
    assert greedy_partition(costs, speeds) == [0, 1, 0, 1, 0]
    assert makespan(costs, [0, 1, 0, 1, 0], speeds) == 7.0
    assert optimal_makespan(costs, speeds) == 6.0


def test_greedy_closed_forms():
    assert greedy_partition([5.0] * 8, [1, 1, 1, 1]) == [0, 1, 2, 3, 0, 1, 2, 3]
    # 12 unit lanes on speeds 1, 2, 3: perfect balance puts 2, 4, 6 lanes on them (2 time units each).
    assignment = greedy_partition([1.0] * 12, [1, 2, 3])
    assert [assignment.count(d) for d in range(3)] == [2, 4, 6]
    assert device_loads([1.0] * 12, assignment, [1, 2, 3]) == [2.0, 2.0, 2.0]
    # Ties: equal costs keep lane order (lane 1 before lane 2), equal finishing times go to device 0.
    assert greedy_partition([1, 2, 2], [1, 1]) == [0, 0, 1]
    # Among empty devices the faster one finishes first (the seed's sort by load alone would tie).
    assert greedy_partition([4], [1, 6, 3]) == [1]
    assert greedy_partition([], [1, 1]) == []


def test_greedy_beats_round_robin_and_random_on_the_seeds_heterogeneous_case():
    ratios = []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        for n_lanes in (6, 9, 12, 24):
            costs = random_lane_costs(rng, n_lanes)
            greedy = makespan(costs, greedy_partition(costs, SEED_SPEEDS), SEED_SPEEDS)
            round_robin = makespan(costs, round_robin_partition(n_lanes, 4), SEED_SPEEDS)
            draws = np.array([random_partition(n_lanes, 4, seed=1000 * seed + k) for k in range(20)])
            random_mean = reference_loads(costs, draws, SEED_SPEEDS).max(-1).mean()
            assert greedy <= round_robin
            assert greedy <= random_mean
            ratios.append(random_mean / greedy)
    assert np.mean(ratios) > 2.5 and min(ratios) > 1.5


def test_random_partition():
    draws = random_partition(40_000, 4, seed=3)
    assert draws == random_partition(40_000, 4, seed=3)
    assert draws != random_partition(40_000, 4, seed=4)
    counts = np.bincount(draws, minlength=4)
    assert len(counts) == 4 and np.all(np.abs(counts - 10_000) < 400)  # ~4 standard deviations
    assert random_partition(0, 3) == []


def test_round_robin_partition():
    assert round_robin_partition(7, 3) == [0, 1, 2, 0, 1, 2, 0]
    assert round_robin_partition(2, 5) == [0, 1]


@pytest.mark.parametrize("call", [
    lambda: random_partition(3, 0), lambda: random_partition(-1, 2), lambda: round_robin_partition(3, True),
    lambda: greedy_partition([1.0], []), lambda: greedy_partition([1.0], [0.0]), lambda: greedy_partition([-1.0], [1]),
    lambda: greedy_partition([float("nan")], [1]),
    lambda: device_loads([1, 2], [0], [1]), lambda: device_loads([1], [2], [1, 1]),
    lambda: device_loads([1], [-1], [1]),
])
def test_partition_errors(call):
    with pytest.raises(ValueError):
        call()


def test_device_loads_and_makespan():
    assert device_loads([4, 2, 6], [0, 1, 0], [2, 1]) == [5.0, 2.0]
    assert makespan([4, 2, 6], [0, 1, 0], [2, 1]) == 5.0
    assert device_loads([4], [0], [1, 1, 1]) == [4.0, 0.0, 0.0]


LANES = [Lane(1, 1), Lane(4, 2), Lane(2, 1), Lane(3, 3)]  # costs 1, 32, 4, 27


def test_place_greedy_on_logical_cpus():
    placement = place(LANES, "cpu:0,cpu:1")
    assert placement == {1: CPUS[0], 3: CPUS[1], 2: CPUS[1], 0: CPUS[1]}
    assert place(LANES, ["cpu:0", "cpu:1"], costs=[10, 1, 1, 1]) == {0: CPUS[0], 1: CPUS[1], 2: CPUS[1], 3: CPUS[1]}
    # Device 1 is 10x faster: lanes of cost 32 and 27 finish there at 3.2 and 5.9, then lanes of
    # cost 4 and 1 finish sooner on device 0 (4, 5) than after them on device 1 (6.3, 6.4).
    fast = place(LANES, CPUS[:2], speeds={"cpu:1": 10.0, "/device:CPU:0": 1.0})
    assert fast == place(LANES, CPUS[:2], speeds=[1.0, 10.0]) == {0: CPUS[0], 1: CPUS[1], 2: CPUS[0], 3: CPUS[1]}


def test_place_other_strategies():
    assert place(LANES, CPUS[:3], "round_robin") == {0: CPUS[0], 1: CPUS[1], 2: CPUS[2], 3: CPUS[0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        drawn = place(LANES, CPUS, "random", seed=5)
    assert drawn == {lane: CPUS[d] for lane, d in enumerate(random_partition(len(LANES), len(CPUS), seed=5))}


def test_place_hypothetical_devices():
    placement = place(["4x1"] * 6, "gpu:0,gpu:1,gpu:2", check_devices=False)
    assert sorted(placement.values()) == sorted(["/device:GPU:0", "/device:GPU:1", "/device:GPU:2"] * 2)
    with pytest.raises(ValueError, match="not available: /device:GPU:0"):
        place(["4x1"], "gpu:0")


def test_place_warns_about_idle_devices():
    idle = r"2 of 4 devices get no lane.*more devices than lanes.*: /device:CPU:2, /device:CPU:3$"
    with pytest.warns(UserWarning, match=idle):
        assert place(["1x1", "1x1"], CPUS) == {0: CPUS[0], 1: CPUS[1]}
    with pytest.warns(UserWarning, match=r"1 of 2 devices get no lane and stay idle: /device:CPU:0$"):
        place(["1x1", "1x1"], CPUS[:2], speeds=[1.0, 100.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        place(LANES, CPUS)


@pytest.mark.parametrize("kwargs, message", [
    (dict(lanes=[]), "no lanes"),
    (dict(devices=[]), "no devices"),
    (dict(devices="cpu:0,cpu:0"), "more than once"),
    (dict(strategy="lpt"), "unknown placement strategy 'lpt'"),
    (dict(speeds=[1.0]), "1 speeds for 2 devices"),
    (dict(speeds=[1.0, 0.0]), "finite and positive"),
    (dict(speeds=[1.0, -2.0]), "finite and positive"),
    (dict(speeds={"cpu:0": 1.0}), r"missing: \['/device:CPU:1'\]"),
    (dict(speeds={"cpu:0": 1.0, "cpu:1": 1.0, "cpu:2": 1.0}), r"not among them: \['/device:CPU:2'\]"),
    (dict(costs=[1.0, 2.0]), "2 costs for 4 lanes"),
    (dict(costs=[1.0, 2.0, -3.0, 1.0]), "non-negative"),
])
def test_place_errors(kwargs, message):
    arguments = dict(lanes=LANES, devices=CPUS[:2]) | kwargs
    with pytest.raises(ValueError, match=message):
        place(**arguments)


def test_placement_json_round_trip():
    placement = place(LANES, CPUS)
    text = placement_to_json(placement)
    assert text == '{"0": "/device:CPU:3", "1": "/device:CPU:0", "2": "/device:CPU:2", "3": "/device:CPU:1"}'
    assert placement_from_json(text) == placement
    assert placement_from_json('{"1": "gpu:1", "0": "/cpu:0"}') == {0: "/device:CPU:0", 1: "/device:GPU:1"}


@pytest.mark.parametrize("text", ['["/device:CPU:0"]', '{"a": "cpu:0"}', '{"01": "cpu:0"}', '{"-1": "cpu:0"}',
                                  '{"0": 3}', '{"0": "tpu"}', "{"])
def test_placement_from_json_errors(text):
    with pytest.raises(ValueError):
        placement_from_json(text)


def test_format_placement_table():
    placement = {0: CPUS[1], 1: CPUS[0], 2: CPUS[1], 3: CPUS[1]}
    table = format_placement_table(LANES, placement, speeds={"cpu:0": 1.0, "cpu:1": 2.0, "cpu:2": 5.0})
    header, *rows, last = table.splitlines()
    assert header.split() == ["lane", "width", "depth", "cost", "device", "speed", "device", "load"]
    # Device 1 (speed 2) holds lanes 0, 2, 3: (1 + 4 + 27) / 2 = 16; device 0 holds lane 1: 32.
    assert [row.split() for row in rows] == [
        ["0", "1", "1", "1", CPUS[1], "2", "16"],
        ["1", "4", "2", "32", CPUS[0], "1", "32"],
        ["2", "2", "1", "4", CPUS[1], "2", "16"],
        ["3", "3", "3", "27", CPUS[1], "2", "16"],
    ]
    assert last == f"makespan: 32 ({CPUS[0]})"
    measured = format_placement_table(LANES[:2], {0: "cpu:0", 1: "cpu:0"}, costs=[0.5, 0.25])
    assert measured.splitlines()[-1] == f"makespan: 0.75 ({CPUS[0]})"
    with pytest.raises(ValueError, match="each lane index"):
        format_placement_table(LANES, {0: CPUS[0]})
    with pytest.raises(ValueError, match="missing"):
        format_placement_table(LANES, placement, speeds={"cpu:1": 1.0})


def test_training_step_returns_loss_plus_squared_gradient_norms():
    layer = keras.layers.Dense(3, use_bias=False)
    x = np.arange(8, dtype=np.float32).reshape(4, 2) / 8
    layer.build((None, 2))
    w = layer.kernel.numpy()
    y = x @ w
    grad = 2 * x.T @ y  # d sum(y²) / dW
    expected = (y**2).sum() + (grad**2).sum()
    assert training_step(layer)(tf.constant(x)).numpy() == pytest.approx(expected, rel=1e-5)


def test_seconds_per_call_counts_and_times_calls():
    calls = []

    def fn(inputs):
        calls.append(inputs)
        time.sleep(0.01 if len(calls) > 2 else 0.2)  # slow warm-up calls are not timed
        return tf.constant(0.0)

    seconds = seconds_per_call(fn, "x", repeats=3, warmup=2)
    assert len(calls) == 5 and 0.01 <= seconds < 0.15
    with pytest.raises(ValueError, match="positive int"):
        seconds_per_call(fn, "x", repeats=0)


def test_probe_device_speed():
    speeds = probe_device_speed(["cpu:0", "/device:CPU:1"], repeats=3)
    assert list(speeds) == CPUS[:2]
    assert min(speeds.values()) == 1.0
    assert all(np.isfinite(s) and s >= 1.0 for s in speeds.values())
    with pytest.raises(ValueError, match="not available"):
        probe_device_speed(["cpu:0", "gpu:0"])


def test_measure_lane_costs_grow_with_width():
    narrow, wide = measure_lane_costs([Lane(1, 1), "4x1"], batch_size=16, repeats=3)
    assert 0 < narrow < wide
