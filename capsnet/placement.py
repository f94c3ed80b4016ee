"""Lane -> device placement of a Multi-Lane CapsNet (Rosario et al. 2019, §IV: lane cost, device speed, greedy).

A *placement* is a plain ``dict[int, str]``: lane index -> canonical device name
(``/device:GPU:1``, see :mod:`capsnet.devices`). A *partition* is the same as a list: entry ``i``
is the index, into a device list, of lane ``i``'s device.

Units: :func:`lane_cost` is the cost model of Rosario et al. 2019 ``width² · depth`` (Eq. 1 without the speed
factor), :func:`measure_lane_costs` gives seconds per training step. Speeds are dimensionless
factors, the slowest device 1 (:func:`probe_device_speed`). A device's *load* is the sum of its
lanes' costs divided by its speed, i.e. a time in the costs' units; the *makespan* is the largest
load, the time until the last device finishes when all run concurrently.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
import warnings
from typing import Callable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from capsnet.devices import canonical_device, parse_devices, resolve_devices
from capsnet.lanes import Lane, as_lane
from capsnet.models import LaneBlock

STRATEGIES = ("greedy", "random", "round_robin")
COST_MODELS = ("model", "measured")
"""How lane costs are obtained (:func:`lane_costs`)."""

Speeds = Mapping[str, float] | Sequence[float] | None


def lane_cost(lane) -> float:
    """The cost model of Rosario et al. 2019 (Eq. 1 without the device factor): ``width² · depth``.

    ``lane`` is a ``Lane`` or anything :func:`capsnet.lanes.as_lane` reads (``"4x1"``, ``(4, 1)``).
    """
    lane = as_lane(lane)
    return float(lane.width**2 * lane.depth)


def training_step(layer: keras.layers.Layer) -> Callable[[tf.Tensor], tf.Tensor]:
    """A ``tf.function`` of one forward + backward pass of a built ``layer``: gradients of
    ``sum(outputs²)`` with respect to its trainable variables. It returns one scalar that depends
    on every gradient, so nothing is pruned and reading it waits for the whole pass."""
    variables = layer.trainable_variables

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(layer(inputs, training=True)))
        grads = tape.gradient(loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return loss + tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads])

    return step


def seconds_per_call(fn: Callable[[tf.Tensor], tf.Tensor], inputs: tf.Tensor, repeats: int, warmup: int = 1) -> float:
    """Median wall seconds of ``fn(inputs).numpy()`` over ``repeats`` calls, after ``warmup``
    untimed calls (the first one traces a ``tf.function``)."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}")
    for _ in range(warmup):
        fn(inputs).numpy()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(inputs).numpy()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_lane_costs(
    lanes: Sequence,
    input_shape: tuple[int, int, int] = (28, 28, 1),
    n_class: int = 10,
    device: str = "/device:CPU:0",
    batch_size: int = 32,
    repeats: int = 3,
) -> list[float]:
    """Measured lane costs: seconds per training step (forward + backward, median of ``repeats``)
    of each lane's ``capsnet.models.LaneBlock(lane, n_class, routings=3)`` on a
    ``[batch_size, *input_shape]`` float32 batch, all on ``device``; one float per lane, in order.
    """

    device = resolve_devices([device])[0]
    costs = []
    with tf.device(device):
        images = tf.random.stateless_uniform((batch_size, *input_shape), seed=(0, 0))
        for lane in lanes:
            layer = LaneBlock(as_lane(lane), n_class, routings=3)
            layer(images)
            costs.append(seconds_per_call(training_step(layer), images, repeats))
    return costs


def lane_costs(kind: str, lanes: Sequence[Lane], **measure_options) -> list[float]:
    """One cost per lane: ``"model"`` -> :func:`lane_cost`; ``"measured"`` -> :func:`measure_lane_costs`
    ``(lanes, **measure_options)`` (input shape, classes, device, batch size)."""
    if kind not in COST_MODELS:
        raise ValueError(f"cost must be one of {', '.join(COST_MODELS)}, got {kind!r}")
    if kind == "measured":
        return measure_lane_costs(lanes, **measure_options)
    return [lane_cost(lane) for lane in lanes]


def speed_map(text: str, devices: Sequence[str]) -> dict[str, float]:
    """``--speeds`` text -> ``{device: speed}``: ``"equal"`` gives 1.0 each, ``"1,3.1"`` one factor
    per device in order. ``ValueError`` for non-numbers or a count that differs from the devices'."""
    if text == "equal":
        return dict.fromkeys(devices, 1.0)
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--speeds: expected comma-separated numbers, one per device, got {text!r}") from None
    if len(values) != len(devices):
        raise ValueError(f"--speeds gives {len(values)} speeds for {len(devices)} devices ({', '.join(devices)})")
    return dict(zip(devices, values))


def probe_device_seconds(devices: Sequence[str] | str, repeats: int = 5) -> dict[str, float]:
    """Seconds of one forward + backward pass of a tiny 512-512-512 dense network on a
    ``[256, 512]`` batch pinned to each device (median of ``repeats``), keyed by canonical device
    name in the given order: the probe of Rosario et al. 2019, §IV-A, before normalisation (so that
    probes made in several processes can be compared)."""
    times = {}
    for device in resolve_devices(devices):
        with tf.device(device):
            net = keras.Sequential(
                [keras.Input((512,)), keras.layers.Dense(512, activation="relu"), keras.layers.Dense(512)]
            )
            batch = tf.random.stateless_normal((256, 512), seed=(0, 0))
            times[device] = seconds_per_call(training_step(net), batch, repeats)
    return times


def speeds_from_seconds(seconds: Sequence[float]) -> list[float]:
    """Probe times -> speed factors: slowest time / time, so the slowest is exactly 1.0."""
    slowest = max(seconds)
    return [slowest / value for value in seconds]


def probe_device_speed(devices: Sequence[str] | str, repeats: int = 5) -> dict[str, float]:
    """Speed factor of each device (Rosario et al. 2019, §IV-A): :func:`probe_device_seconds`
    normalised by :func:`speeds_from_seconds` (the slowest device exactly 1.0, faster ones above).
    Keys are canonical device names, in the given order.
    """
    times = probe_device_seconds(devices, repeats)
    return dict(zip(times, speeds_from_seconds(list(times.values()))))


def _checked_costs(costs: Sequence[float]) -> list[float]:
    values = [float(c) for c in costs]
    if not all(math.isfinite(c) and c >= 0 for c in values):
        raise ValueError(f"lane costs must be finite and non-negative, got {list(costs)}")
    return values


def _checked_speeds(speeds: Sequence[float]) -> list[float]:
    values = [float(s) for s in speeds]
    if not values:
        raise ValueError("no devices: the speed list is empty")
    if not all(math.isfinite(s) and s > 0 for s in values):
        raise ValueError(f"device speeds must be finite and positive, got {list(speeds)}")
    return values


def greedy_partition(costs: Sequence[float], speeds: Sequence[float]) -> list[int]:
    """The greedy partition of Rosario et al. 2019 (Algorithm 1): lanes in decreasing cost order (ties: lower lane
    index first), each to the device where it would finish first, i.e. least
    ``(load + cost) / speed`` (ties: lowest device index). One device per entry of ``speeds``.

    With equal speeds this is the paper's "largest remaining lane into the emptiest bin", Graham's
    LPT rule (makespan at most ``4/3 - 1/(3m)`` times the optimum on ``m`` devices). With mixed
    speeds it is the LPT rule for uniform machines (at most ``2m/(m+1)`` times the optimum,
    Gonzalez, Ibarra & Sahni 1977); unlike the paper's sort by load alone, it breaks ties among
    empty devices toward the faster one.
    Returns the device index of each lane.
    """
    costs = _checked_costs(costs)
    speeds = _checked_speeds(speeds)
    loads = [0.0] * len(speeds)
    assignment = [0] * len(costs)
    for lane in sorted(range(len(costs)), key=lambda i: -costs[i]):
        device = min(range(len(speeds)), key=lambda d: (loads[d] + costs[lane]) / speeds[d])
        loads[device] += costs[lane]
        assignment[lane] = device
    return assignment


def _check_counts(n_lanes: int, n_devices: int) -> None:
    for name, value, least in (("lanes", n_lanes, 0), ("devices", n_devices, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"the number of {name} must be an int >= {least}, got {value!r}")


def random_partition(n_lanes: int, n_devices: int, seed: int | None = 0) -> list[int]:
    """Each lane on a device drawn uniformly at random (``numpy.random.default_rng(seed)``)."""
    _check_counts(n_lanes, n_devices)
    return np.random.default_rng(seed).integers(n_devices, size=n_lanes).tolist()


def round_robin_partition(n_lanes: int, n_devices: int) -> list[int]:
    """Lane ``i`` on device ``i mod n_devices``."""
    _check_counts(n_lanes, n_devices)
    return [lane % n_devices for lane in range(n_lanes)]


def partition(strategy: str, costs: Sequence[float], speeds: Sequence[float], seed: int | None = 0) -> list[int]:
    """The device index of each lane under ``strategy`` (:data:`STRATEGIES`): :func:`greedy_partition`
    on ``costs`` and ``speeds``, :func:`random_partition` with ``seed``, or :func:`round_robin_partition`
    (one device per entry of ``speeds``)."""
    if strategy == "greedy":
        return greedy_partition(costs, speeds)
    if strategy == "random":
        return random_partition(len(costs), len(speeds), seed)
    if strategy == "round_robin":
        return round_robin_partition(len(costs), len(speeds))
    raise ValueError(f"unknown placement strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")


def device_loads(costs: Sequence[float], assignment: Sequence[int], speeds: Sequence[float]) -> list[float]:
    """Per device: the sum of its lanes' costs divided by its speed (time in the costs' units)."""
    costs = _checked_costs(costs)
    speeds = _checked_speeds(speeds)
    if len(assignment) != len(costs):
        raise ValueError(f"{len(assignment)} device indices for {len(costs)} lanes")
    loads = [0.0] * len(speeds)
    for cost, device in zip(costs, assignment):
        if isinstance(device, bool) or not isinstance(device, (int, np.integer)) or not 0 <= device < len(speeds):
            raise ValueError(f"device index {device!r} out of range for {len(speeds)} devices")
        loads[device] += cost
    return [load / speed for load, speed in zip(loads, speeds)]


def makespan(costs: Sequence[float], assignment: Sequence[int], speeds: Sequence[float]) -> float:
    """The largest device load: the time until the last device finishes (costs' units)."""
    return max(device_loads(costs, assignment, speeds))


def _speed_list(devices: list[str], speeds: Speeds) -> list[float]:
    """Speeds aligned with ``devices``: all 1.0 for ``None``; a mapping must name exactly these
    devices (any spelling :func:`canonical_device` reads); a sequence must have one per device."""
    if speeds is None:
        return [1.0] * len(devices)
    if isinstance(speeds, Mapping):
        by_device = {canonical_device(name): speed for name, speed in speeds.items()}
        missing = [d for d in devices if d not in by_device]
        extra = [d for d in by_device if d not in devices]
        if missing or extra:
            raise ValueError(f"speeds must name exactly the devices; missing: {missing}, not among them: {extra}")
        return _checked_speeds([by_device[d] for d in devices])
    if len(speeds) != len(devices):
        raise ValueError(f"{len(speeds)} speeds for {len(devices)} devices")
    return _checked_speeds(speeds)


def _lane_costs(lanes: list[Lane], costs: Sequence[float] | None) -> list[float]:
    if costs is None:
        return [lane_cost(lane) for lane in lanes]
    if len(costs) != len(lanes):
        raise ValueError(f"{len(costs)} costs for {len(lanes)} lanes")
    return _checked_costs(costs)


def place(
    lanes: Sequence,
    devices: Sequence[str] | str,
    strategy: str = "greedy",
    speeds: Speeds = None,
    costs: Sequence[float] | None = None,
    seed: int | None = 0,
    *,
    check_devices: bool = True,
) -> dict[int, str]:
    """Place lanes on devices; returns ``{lane index: canonical device}``.

    ``strategy``: ``"greedy"`` (:func:`greedy_partition` on ``costs`` and ``speeds``),
    ``"random"`` (:func:`random_partition` with ``seed``) or ``"round_robin"``. ``costs``
    default to :func:`lane_cost` of each lane, ``speeds`` (a ``{device: speed}`` mapping or one
    per device, in order) to 1.0. ``check_devices=False`` only canonicalises the device names
    instead of requiring them to exist, for planning on hardware this host does not have.

    A device may get no lane (always when there are more devices than lanes; with unequal speeds
    greedy may leave a slow device idle; random may too): it then stays idle, and a warning names it.
    Raises ``ValueError`` for no lanes or devices, an unknown strategy, speeds or costs that do
    not match the devices or lanes, non-positive speeds or negative costs.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown placement strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    lanes = [as_lane(lane) for lane in lanes]
    if not lanes:
        raise ValueError("no lanes to place")
    devices = resolve_devices(devices) if check_devices else parse_devices(devices)
    speed_list = _speed_list(devices, speeds)
    cost_list = _lane_costs(lanes, costs)
    assignment = partition(strategy, cost_list, speed_list, seed)
    idle = [device for index, device in enumerate(devices) if index not in assignment]
    if idle:
        reason = " (more devices than lanes)" if len(devices) > len(lanes) else ""
        warnings.warn(f"{len(idle)} of {len(devices)} devices get no lane and stay idle{reason}: {', '.join(idle)}")
    return {lane: devices[device] for lane, device in enumerate(assignment)}


def format_placement_table(
    lanes: Sequence,
    placement: Mapping[int, str],
    speeds: Mapping[str, float] | None = None,
    costs: Sequence[float] | None = None,
) -> str:
    """A text table, one row per lane: lane, width, depth, cost, device, its speed and its load
    (speed-weighted: costs / speed, time units), then a makespan line. ``costs`` default to
    :func:`lane_cost`, ``speeds`` (a ``{device: speed}`` mapping; it may also name idle devices)
    to 1.0."""
    lanes = [as_lane(lane) for lane in lanes]
    if sorted(placement) != list(range(len(lanes))):
        raise ValueError(f"the placement must map each lane index 0..{len(lanes) - 1}, got {sorted(placement)}")
    if speeds is not None and not isinstance(speeds, Mapping):
        raise ValueError("speeds for a placement table must be a {device: speed} mapping")
    cost_list = _lane_costs(lanes, costs)
    where = {lane: canonical_device(device) for lane, device in placement.items()}
    devices = list(dict.fromkeys([*(where[i] for i in range(len(lanes))), *map(canonical_device, speeds or {})]))
    speed_list = _speed_list(devices, speeds)
    loads = device_loads(cost_list, [devices.index(where[i]) for i in range(len(lanes))], speed_list)
    header = ("lane", "width", "depth", "cost", "device", "speed", "device load")
    rows = [
        (str(i), str(lane.width), str(lane.depth), f"{cost_list[i]:.4g}", where[i],
         f"{speed_list[devices.index(where[i])]:.4g}", f"{loads[devices.index(where[i])]:.4g}")
        for i, lane in enumerate(lanes)
    ]
    widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in [header, *rows]]
    busiest = max(range(len(devices)), key=loads.__getitem__)
    lines.append(f"makespan: {loads[busiest]:.6g} ({devices[busiest]})")
    return "\n".join(lines)


_LANE_KEY = re.compile(r"0|[1-9][0-9]*")


def placement_to_json(placement: Mapping[int, str]) -> str:
    """``{0: "/device:CPU:0"}`` -> ``'{"0": "/device:CPU:0"}'`` (lanes in order, devices canonical)."""
    return json.dumps({str(int(lane)): canonical_device(device) for lane, device in sorted(placement.items())})


def placement_from_json(text: str) -> dict[int, str]:
    """Inverse of :func:`placement_to_json`: a JSON object of lane index strings -> device names.
    Raises ``ValueError`` for anything else."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"a placement must be a JSON object of lane index -> device, got {text!r}")
    placement = {}
    for key, device in data.items():
        if not _LANE_KEY.fullmatch(key) or not isinstance(device, str):
            raise ValueError(f"bad placement entry {key!r}: {device!r} (expected \"lane index\": \"device\")")
        placement[int(key)] = canonical_device(device)
    return placement
