"""Worker side of ``tests/horovod_jobs/test_model_parallel.py``: run under ``horovodrun -np N``.

``python tests/helpers/horovod_workers/model_parallel_checks.py --lanes SPEC --groups G --out DIR``
spreads an MLCN of ``SPEC`` lanes (``horovod_jobs.model_parallel``) over the ranks, ``G`` replicas,
each rank offering two logical CPUs; it trains ``STEPS`` batches with ``train_on_batch`` and, in
the same process, trains the ordinary single-process MLCN built from the same seed on the union
of the replicas' batches (the reference). It writes ``DIR/rank{r}.json``: its lanes, its
variables (path, shape, device), the devices of its lanes' ops in the traced training step, the
exchanged tensors' shapes, the replicas' mean loss per step
and the reference's, the largest weight differences to the reference at the start and after the
steps; rank 0 also writes the gathered ``DIR/model.keras`` and the reference's class lengths on a
probe batch, ``DIR/reference.npy``. One intra-op and one inter-op thread per worker.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

SHAPE, CLASSES, BATCH, STEPS, SEED, LEARNING_RATE = (20, 20, 1), 4, 6, 3, 7, 0.01
DEVICES = ["/device:CPU:0", "/device:CPU:1"]


def batches(groups: int) -> tuple[np.ndarray, np.ndarray]:
    """``STEPS`` union batches: images ``[STEPS, groups·BATCH, *SHAPE]``, labels ``[STEPS, groups·BATCH]``."""
    rng = np.random.default_rng(SEED)
    return (rng.random((STEPS, groups * BATCH, *SHAPE), dtype=np.float32),
            rng.integers(CLASSES, size=(STEPS, groups * BATCH)).astype(np.int32))


def max_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b, strict=True))


def lane_ops(shard) -> list[list]:
    """``[lane, op type, backward?, device]`` of the convolutions and routing matmuls in the
    traced training step of ``shard`` (traced only: nothing runs, no collective happens)."""
    import tensorflow as tf

    step = tf.function(shard.train_step).get_concrete_function(
        (tf.TensorSpec([None, *SHAPE]), tf.TensorSpec([None], tf.int32)))
    found = set()
    for op in step.graph.get_operations():
        parts = op.name.split("/")
        lane = next((int(p[4:].split("_")[0]) for p in parts if p.startswith("lane") and p[4:5].isdigit()), None)
        if lane is not None and op.type in {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "BatchMatMulV2"}:
            found.add((lane, op.type, parts[0] == "gradients", op.device))
    return sorted(list(entry) for entry in found)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lanes", required=True)
    parser.add_argument("--groups", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from capsnet.devices import canonical_device, configure_logical_cpus
    from horovod_jobs.distributed import init_workers

    workers = init_workers(process_sets=args.groups > 1)
    configure_logical_cpus(len(DEVICES))
    import horovod.tensorflow as hvd
    import keras

    from capsnet.lanes import parse_lanes
    from capsnet.models import build_mlcn
    from capsnet.rank_placement import place_on_slots
    from horovod_jobs.model_parallel import LaneShard, RankGroups, gather_full_model, gather_slots, make_process_sets

    layout = RankGroups(workers.rank, workers.size, args.groups)
    sets = make_process_sets(layout)
    lanes = parse_lanes(args.lanes)
    slots = gather_slots(layout, DEVICES, probe=False)[0]
    assignment = place_on_slots(lanes, slots)
    keras.utils.set_random_seed(SEED)
    shard = LaneShard(SHAPE, CLASSES, lanes, 3, 0.0, lane_slots=[slots[i] for i in assignment],
                      position=layout.position, sets=sets, main_device=DEVICES[0])
    shard.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE), jit_compile=False)
    keras.utils.set_random_seed(SEED)
    reference = build_mlcn(SHAPE, CLASSES, lanes)
    reference.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE))

    def lane_weights(model) -> list[np.ndarray]:
        return [w for lane in shard.local_lanes for w in model.lane_blocks[lane].get_weights()]

    start = {"lanes": max_difference(lane_weights(shard), lane_weights(reference)),
             "decoder": max_difference(shard.decoder.get_weights(), reference.decoder.get_weights())}
    images, labels = batches(args.groups)
    mine = slice(layout.group * BATCH, (layout.group + 1) * BATCH)
    local = tf.stack([shard.lane_blocks[lane](images[0, mine]) for lane in shard.local_lanes])
    gathered = shard.lane_outputs(images[0, mine])
    losses, reference_losses = [], []
    for step in range(STEPS):
        loss = shard.train_on_batch(images[step, mine], labels[step, mine], return_dict=True)["loss"]
        losses.append(float(hvd.allreduce(tf.constant(float(loss), tf.float64), op=hvd.Average, name=f"loss{step}")))
        reference_losses.append(float(reference.train_on_batch(images[step], labels[step], return_dict=True)["loss"]))
    report = {
        "rank": workers.rank, "group": layout.group, "position": layout.position,
        "local_lanes": shard.local_lanes, "placement": [str(slots[i]) for i in assignment],
        "variables": [{"path": v.path, "shape": list(v.shape), "device": canonical_device(v.value.device)}
                      for v in shard.trainable_variables],
        "lane_devices": {str(lane): shard.lane_device(lane) for lane in shard.local_lanes},
        "local_shape": local.shape.as_list(), "gathered_shape": gathered.shape.as_list(),
        "losses": losses, "reference_losses": reference_losses, "start_difference": start,
        "end_difference": {"lanes": max_difference(lane_weights(shard), lane_weights(reference)),
                           "decoder": max_difference(shard.decoder.get_weights(), reference.decoder.get_weights())},
    }
    report["lane_ops"] = lane_ops(shard)
    full = gather_full_model(shard, layout)
    if full is not None:
        full.save(args.out / "model.keras")
        probe = np.random.default_rng(SEED + 1).random((5, *SHAPE), dtype=np.float32)
        np.save(args.out / "probe.npy", probe)
        np.save(args.out / "reference.npy", reference(probe).numpy())
    (args.out / f"rank{workers.rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
