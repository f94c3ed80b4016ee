"""MLCN model parallel across Horovod ranks (:mod:`horovod_jobs.model_parallel`,
:mod:`capsnet.rank_placement`).

Under ``horovodrun`` (Gloo, loopback) ``tests/helpers/horovod_workers/model_parallel_checks.py``
spreads heterogeneous lanes over 3 ranks, and over 2 replicas of 2 ranks, each rank offering two
logical CPUs, and trains them next to the ordinary single-process MLCN built from the same seed
(on the union of the replicas' batches): losses and weights must agree, each rank must hold only
its lanes, on the devices of its slots, and the gathered ``model.keras`` must load in this plain
process and predict as the reference does. The command-line job is tested in
``tests/horovod_jobs/test_train.py``; the pieces that need no other process are tested here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from capsnet.lanes import parse_lanes
from capsnet.models import load_model
from capsnet.placement import lane_cost
from capsnet.rank_placement import Slot, format_slot_table, place_on_slots, slot_placement_record
from horovod_jobs.model_parallel import RankGroups, gather_lane_outputs
from tests.helpers.environment import REPO
from tests.helpers.horovod_workers import model_parallel_checks

WORKER = Path(model_parallel_checks.__file__)
WORKER_ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
HETEROGENEOUS = "2x1,1x2,1x1,2x2,1x1"


def run_checks(horovodrun: Path, out: Path, ranks: int, lanes: str, groups: int = 1) -> list[dict]:
    command = [str(horovodrun), "-np", str(ranks), "-H", f"localhost:{ranks}", "--gloo", sys.executable, str(WORKER),
               "--lanes", lanes, "--groups", str(groups), "--out", str(out)]
    result = subprocess.run(command, cwd=REPO, env=WORKER_ENV, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(ranks)]


def check_reports(reports: list[dict], lanes: str, groups: int, out: Path) -> None:
    n_lanes, ranks = len(parse_lanes(lanes)), len(reports)
    per_group = ranks // groups
    for report in reports:
        # Same losses (mean over the replicas) and weights as one process on the union batch.
        np.testing.assert_allclose(report["losses"], report["reference_losses"], rtol=1e-5)
        assert report["start_difference"] == {"lanes": 0.0, "decoder": 0.0}
        assert report["end_difference"]["lanes"] < 1e-5 and report["end_difference"]["decoder"] < 1e-5
        # Only its own lanes' variables (and the replicated decoder), each on its slot's device.
        mine = report["local_lanes"]
        lane_paths = {v["path"].split("/")[1] for v in report["variables"] if "/lane" in v["path"]}
        assert lane_paths == {f"lane{lane}" for lane in mine}
        for variable in report["variables"]:
            part = variable["path"].split("/")[1]
            expected = report["lane_devices"][part[4:]] if part.startswith("lane") else "/device:CPU:0"
            assert variable["device"] == expected, variable
        assert all(report["placement"][lane] == f"rank {report['position']} {report['lane_devices'][str(lane)]}"
                   for lane in mine)
        # Its lanes' forward and backward ops are placed on their slots' devices.
        ops = report["lane_ops"]
        assert {lane for lane, *_ in ops} == set(mine)
        assert all(device == report["lane_devices"][str(lane)] for lane, _, _, device in ops), ops
        for lane in mine:
            kinds = {(kind, backward) for other, kind, backward, _ in ops if other == lane}
            assert {("Conv2D", False), ("Conv2DBackpropFilter", True), ("BatchMatMulV2", True)} <= kinds
        batch = model_parallel_checks.BATCH
        assert report["local_shape"] == [len(mine), batch, model_parallel_checks.CLASSES]
        assert report["gathered_shape"] == [batch, model_parallel_checks.CLASSES, n_lanes]
    # The ranks of a replica share the lanes out; every replica holds them the same way.
    for group in range(groups):
        held = sorted(lane for report in reports[group * per_group:(group + 1) * per_group]
                      for lane in report["local_lanes"])
        assert held == list(range(n_lanes))
    assert all(report["local_lanes"] == reports[report["position"]]["local_lanes"] for report in reports)
    # The gathered model loads in this plain process and predicts as the reference does.
    model = load_model(out / "model.keras")
    probe = np.load(out / "probe.npy")
    np.testing.assert_allclose(model(probe).numpy(), np.load(out / "reference.npy"), rtol=1e-4, atol=1e-6)


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_heterogeneous_lanes_over_three_ranks_train_as_one_process(horovodrun, tmp_path):
    check_reports(run_checks(horovodrun, tmp_path, 3, HETEROGENEOUS), HETEROGENEOUS, 1, tmp_path)


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_two_replicas_of_two_ranks_train_as_one_process_on_the_union_batch(horovodrun, tmp_path):
    reports = run_checks(horovodrun, tmp_path, 4, HETEROGENEOUS, groups=2)
    assert [(r["group"], r["position"]) for r in reports] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    check_reports(reports, HETEROGENEOUS, 2, tmp_path)


def test_rank_groups_split_consecutive_ranks_into_replicas():
    layouts = [RankGroups(rank, 8, 2) for rank in range(8)]
    assert [(g.group, g.position) for g in layouts] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)]
    assert layouts[5].group_ranks(1) == [4, 5, 6, 7] and layouts[5].peer_ranks(1) == [1, 5]
    assert RankGroups(2, 3).group_size == 3 and RankGroups(2, 3).peer_ranks(2) == [2]
    with pytest.raises(ValueError, match="--data-groups 4 must divide the 6 ranks.*--data-groups 1 or 2 or 3 or 6"):
        RankGroups(0, 6, 4)


def test_lane_outputs_assemble_in_lane_order_and_each_rank_gets_its_rows_of_the_gradient():
    """One rank (no exchange): the rows come back as ``[B, K, L]`` in lane order, and the gradient
    of the local rows is the upstream gradient's rows from ``start`` (here all of them)."""
    local = tf.random.stateless_normal((3, 2, 4), seed=(1, 2))  # [L_rank, B, K]
    order = [2, 0, 1]  # lane l is row order[l]
    weights = tf.random.stateless_normal((2, 4, 3), seed=(3, 4))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(local)
        assembled = gather_lane_outputs(local, None, 0, order)
        expected = tf.transpose(tf.gather(local, order), (1, 2, 0))
        loss, expected_loss = tf.reduce_sum(assembled * weights), tf.reduce_sum(expected * weights)
    np.testing.assert_array_equal(assembled.numpy(), expected.numpy())
    np.testing.assert_allclose(tape.gradient(loss, local).numpy(), tf.convert_to_tensor(tape.gradient(expected_loss, local)).numpy())


SLOTS = [Slot(0, "a", "/device:CPU:0"), Slot(0, "a", "/device:CPU:1"), Slot(1, "b", "/device:GPU:0")]


def test_place_on_slots_balances_speed_weighted_loads_over_every_rank_and_device():
    lanes = parse_lanes("4x1,4x1,2x2,2x1,1x3")
    speeds = [1.0, 1.0, 3.0]
    assignment = place_on_slots(lanes, SLOTS, "greedy", speeds)
    # Brute force over all 3^5 assignments: greedy's makespan is within LPT's bound of the optimum.
    costs = [lane_cost(lane) for lane in lanes]
    grid = np.array(np.meshgrid(*[range(3)] * 5)).reshape(5, -1).T
    makespans = [max(sum(c for c, d in zip(costs, row) if d == s) / speeds[s] for s in range(3)) for row in grid]
    greedy = max(sum(c for c, d in zip(costs, assignment) if d == s) / speeds[s] for s in range(3))
    assert greedy <= 2 * 3 / 4 * min(makespans) + 1e-9
    table = format_slot_table(lanes, SLOTS, assignment, speeds)
    assert table.splitlines()[0].split() == ["rank", "host", "device", "speed", "lanes", "predicted", "load"]
    assert len(table.splitlines()) == 5 and table.splitlines()[-1].startswith(f"makespan: {greedy:.6g}")
    record = slot_placement_record(lanes, SLOTS, assignment)
    assert record["0"] == {"lane": "4x1", "rank": SLOTS[assignment[0]].rank, "host": SLOTS[assignment[0]].host,
                           "device": SLOTS[assignment[0]].device}


def test_a_rank_without_a_lane_is_an_error_that_names_the_fix_and_an_idle_device_a_warning():
    with pytest.raises(ValueError, match="rank\\(s\\) 1 get no lane; 1 lanes cannot occupy 2 ranks: start fewer"):
        place_on_slots(["2x1"], SLOTS)
    with pytest.raises(ValueError, match="rank\\(s\\) 1 get no lane; the strategy left them without a lane"):
        place_on_slots(["1x1"] * 3, SLOTS, "greedy", [10.0, 10.0, 1.0])  # rank 1 too slow to get one
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every device busy: no warning
        assert place_on_slots(["1x1"] * 3, SLOTS, "round_robin") == [0, 1, 2]
    interleaved = [SLOTS[0], SLOTS[2], SLOTS[1]]
    with pytest.warns(UserWarning, match="1 of 3 devices get no lane and stay idle: rank 0 /device:CPU:1"):
        assert place_on_slots(["1x1", "1x1"], interleaved, "round_robin") == [0, 1]
