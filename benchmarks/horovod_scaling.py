"""Training throughput under Horovod: the recognizer and MLCN, 1 vs 2 workers, gradient sync vs model averaging.

For each task, ``train.py --task nhr|mlcn`` runs three times under ``horovodrun -H localhost:W
--gloo``: 1 worker, 2 workers with ``--sync gradients``, 2 workers with ``--sync average
--average-every K``. Every worker has one TensorFlow intra-op and one inter-op thread and is
pinned to its own core (the ``local_rank``-th of those this process may use, if there are
enough). The data: tiny synthetic text lines (``tfnhr synth``, at most 16 characters, scaled to
24 px high; the small recognizer, 2×2 blocks, 40k-pixel batches) and the synthetic 28×28 shapes
(MLCN, 2 lanes of width 4, batch 100).

Throughput of an epoch = the examples (and pixels) that all workers trained on in it / rank 0's
seconds from the epoch's start to its last training batch (validation excluded); the figure is
the median over the epochs after the first (which traces the model; the recognizer's second
epoch is still slower than the later ones, hence several). Scaling efficiency =
throughput(2 workers) / (2 × throughput(1 worker)); ``average / gradients`` = throughput with
model averaging / with gradient averaging (2 workers).

    python benchmarks/horovod_scaling.py --out build/bench/horovod_scaling.json [--quick]

Internally each worker runs this file with ``--worker REPORT -- TRAIN.PY OPTIONS``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness

RUNS = ((1, "gradients"), (2, "gradients"), (2, "average"))
NHR_MODEL = ["--preset", "small", "--block", "2x2", "--height", "24", "--batch-pixels", "40000", "--threads", "1"]
MLCN_MODEL = ["--model", "mlcn", "--lanes", "2", "--width", "4", "--depth", "1", "--dataset", "synthetic",
              "--batch-size", "100", "--threads", "1"]
MLCN_PIXELS = 28 * 28
SIZES = {  # (training examples, epochs) per task
    "full": {"nhr": (192, 10), "mlcn": (3200, 5)},
    "quick": {"nhr": (96, 6), "mlcn": (1600, 4)},
}


def pin_local_rank(cpus: str | None) -> None:
    """Inside ``horovodrun``: pin this process to CPU ``cpus[local rank]`` (comma-separated), if given."""
    if cpus:
        os.sched_setaffinity(0, {int(cpus.split(",")[int(os.environ["HOROVOD_LOCAL_RANK"])])})


def run_worker(report: Path, cpus: str | None, job_argv: list[str]) -> int:
    """Inside ``horovodrun``: pinned to CPU ``cpus[local rank]`` (if given), train with a timer;
    rank 0 writes the training seconds per epoch."""
    pin_local_rank(cpus)
    import horovod.tensorflow as hvd
    import keras

    class TrainingSeconds(keras.callbacks.Callback):
        """Seconds from each epoch's start to its last training batch's end."""

        def __init__(self) -> None:
            super().__init__()
            self.seconds: list[float] = []

        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.start = self.last = time.perf_counter()

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            self.last = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            self.seconds.append(self.last - self.start)

    from horovod_jobs.train import main

    timer = TrainingSeconds()
    status = main(job_argv, callbacks=[timer])
    if status == 0 and hvd.rank() == 0:
        report.write_text(json.dumps({"train_seconds": timer.seconds}))
    return status


def launch(workers: int, job_argv: list[str], env: dict, folder: Path, pin_cores: bool = True,
           cpus: list[int] | None = None) -> list[float]:
    """``train.py JOB_ARGV`` on ``workers`` local Gloo workers; rank 0's training seconds per epoch.
    ``pin_cores``: pin each worker to its own core (when there are enough) of ``cpus`` (default:
    those this process may use)."""
    report = folder / "report.json"
    cpus = cpus or sorted(os.sched_getaffinity(0))
    pin = ["--cpus", ",".join(map(str, cpus))] if pin_cores and len(cpus) >= workers else []
    command = [str(Path(sys.executable).parent / "horovodrun"), "-np", str(workers), "-H", f"localhost:{workers}",
               "--gloo", sys.executable, str(Path(__file__).resolve()), "--worker", str(report), *pin, "--", *job_argv]
    result = subprocess.run(command, cwd=_harness.REPO, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(job_argv[:2])} on {workers} workers failed:\n"
                         f"{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return json.loads(report.read_text())["train_seconds"]


def nhr_job(root: Path, examples: int, epochs: int) -> tuple[list[str], int, int]:
    """Writes the synthetic lines; returns (train.py options, examples, pixels per epoch)."""
    from tfnhr.charset import Charset
    from tfnhr.data.synthetic import iam_writer
    from tfnhr.data.samples import drop_infeasible
    from tfnhr.training import TrainOptions, load_subset

    data = root / "lines"
    iam_writer.write_iam_layout(data, {"train": examples, "val": 8, "test": 2}, kind="lines", seed=0,
                               progress=False, max_chars=16)
    train_set = load_subset(TrainOptions(data=data, height=24, verbose=0), "train", None)
    kept = drop_infeasible(train_set, Charset.from_texts(train_set.texts), width_reduction=4)  # blocks 2x2, 2x2
    options = ["--task", "nhr", "--data", str(data), "--epochs", str(epochs), "--quiet", *NHR_MODEL]
    return options, len(kept), int(kept.pixels().sum())


def mlcn_job(examples: int, epochs: int, workers: int) -> tuple[list[str], int, int]:
    """(train.py options, examples, pixels per epoch): each worker trains on examples // workers."""
    options = ["--task", "mlcn", *MLCN_MODEL, "--limit-train", str(examples), "--limit-test", "200",
               "--epochs", str(epochs)]
    trained = examples // workers * workers
    return options, trained, trained * MLCN_PIXELS


def measure_tasks(args: argparse.Namespace) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "",
           "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}
    sizes = SIZES["quick" if args.quick else "full"]
    results = {}
    with tempfile.TemporaryDirectory(prefix="horovod_scaling_") as temporary:
        root = Path(temporary)
        for task in args.tasks.split(","):
            examples, epochs = sizes[task]
            task_env = {**env, "TF_ENABLE_ONEDNN_OPTS": "1"} if task == "mlcn" else env  # as capsnet train
            nhr = nhr_job(root, examples, epochs) if task == "nhr" else None
            runs = {}
            for workers, sync in RUNS:
                options, trained, pixels = nhr or mlcn_job(examples, epochs, workers)
                name = f"{workers}w_{sync}"
                folder = root / task / name
                folder.mkdir(parents=True)
                sync_options = ["--sync", sync, "--average-every", str(args.average_every)]
                started = time.monotonic()
                seconds = launch(workers, [*options, *sync_options, "--out", str(folder / "out")], task_env, folder)
                steady = statistics.median(seconds[1:])
                runs[name] = {"workers": workers, "sync": sync, "epoch_train_seconds": seconds,
                              "examples_per_epoch": trained, "pixels_per_epoch": pixels,
                              "examples_per_second": trained / steady, "pixels_per_second": pixels / steady,
                              "job_seconds": time.monotonic() - started}
                print(f"{task:5s} {workers} worker(s) {sync:9s} {trained / steady:9.1f} examples/s "
                      f"{pixels / steady:12,.0f} pixels/s  (epochs {', '.join(f'{s:.2f}' for s in seconds)} s)",
                      flush=True)
            one, two, average = (runs[f"{w}w_{s}"]["examples_per_second"] for w, s in RUNS)
            results[task] = {"runs": runs, "scaling_efficiency": two / (2 * one),
                             "average_vs_gradients": average / two}
    return results


def print_table(results: dict, average_every: int) -> None:
    print(f"\n{'task':5s} {'run':22s} {'examples/s':>11s} {'pixels/s':>13s}")
    for task, figures in results.items():
        for run in figures["runs"].values():
            label = f"{run['workers']} worker(s), {run['sync']}"
            print(f"{task:5s} {label:22s} {run['examples_per_second']:11.1f} {run['pixels_per_second']:13,.0f}")
        print(f"{task:5s} scaling efficiency (2 workers, gradients): {figures['scaling_efficiency']:.2f}; "
              f"model averaging (K={average_every}) / gradient sync: {figures['average_vs_gradients']:.2f}")


def measure(args: argparse.Namespace) -> dict:
    results = measure_tasks(args)
    print_table(results, args.average_every)
    return {"quick": args.quick, "average_every": args.average_every, "threads_per_worker": 1,
            "cores": len(os.sched_getaffinity(0)), "results": results}


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, threads=None)
    parser.add_argument("--quick", action="store_true", help="less data and fewer epochs (a few minutes)")
    parser.add_argument("--tasks", default="nhr,mlcn", help="comma-separated subset of nhr,mlcn")
    parser.add_argument("--average-every", type=int, default=4, help="K of the model-averaging runs")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # internal: rank 0's report file
    parser.add_argument("--cpus", help=argparse.SUPPRESS)  # internal: the worker of local rank r takes the r-th
    parser.add_argument("job", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return run_worker(args.worker, args.cpus, [part for part in args.job if part != "--"])
    return _harness.main(measure, args)


if __name__ == "__main__":
    sys.exit(main())
