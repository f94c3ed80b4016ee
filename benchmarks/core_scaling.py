"""How much two single-threaded processes gain over one on this machine: its own ceiling for
"2 workers x 1 thread", measured on the same work in one run.

The same fixed work runs in a process pinned to core 0 alone, then in two such processes at once
(pinned to cores 0 and 1, their timed parts started together); both sides are reported with
their ratio ``2 x alone / together``: 2.00x when the cores share nothing, less where they share
caches, memory bandwidth or (on a cloud VM) a physical core. Two kinds of work:

- ``matmul``: a 1024 x 1024 float32 ``tf.matmul`` (compute-bound, the single-thread peak of
  ``training_throughput.py``);
- ``step``: one training step of the ``small`` recognizer (compiled MDLSTM scan, 150,000-px batch
  of synthetic 32-px lines), the work a Horovod worker repeats, without the allreduce and the
  data pipeline.

A two-worker job cannot gain more than the ``step`` ratio over one worker; what is lost below it
is Horovod's (allreduce, waiting for the slower worker, data threads).

    taskset -c 0,1 .venv/bin/python benchmarks/core_scaling.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness

WORKS = ("matmul", "step")
BARRIER_POLL = 0.005
"""Seconds between a ready child's looks at whether the others are ready too."""


def child(work: str, repeats: int, barrier: Path, parties: int) -> dict:
    """In a child process: prepare ``work`` and warm it up, mark itself ready in the folder
    ``barrier`` and wait until ``parties`` children are, then time ``repeats`` calls; the JSON of
    per-call seconds."""
    tf = _harness.set_threads(1)
    import training_throughput as throughput

    if work == "matmul":
        call = _harness.matmul_call(tf)
    else:
        from tfnhr.charset import Charset
        from tfnhr.data.dataset import make_dataset

        data = throughput.synthetic_lines(40, seed=0)
        charset = Charset.from_texts(data.texts)
        batch = next(iter(make_dataset(data, charset, 150_000, seed=0)))
        _, step = throughput.compiled_step(tf, "small", charset, seed=0)

        def call():
            throughput.train_on(step, batch)
    for _ in range(3):
        call()
    (barrier / f"ready-{os.getpid()}").touch()
    while len(list(barrier.glob("ready-*"))) < parties:
        time.sleep(BARRIER_POLL)
    seconds = [_harness.timed(call)[1] for _ in range(repeats)]
    return {"work": work, "seconds": seconds}


def launch(cores: list[int], work: str, repeats: int) -> list[list[float]]:
    """Run one child per core in ``cores`` at once; each child's per-call seconds. A child that
    fails stops the others (they would wait for it at the barrier)."""
    barrier = Path(tempfile.mkdtemp(prefix="core_scaling_"))
    env = _harness.single_threaded_child_env()
    try:
        processes = []
        for core in cores:
            with open(barrier / f"out-{core}", "w") as out, open(barrier / f"err-{core}", "w") as err:
                processes.append(subprocess.Popen(
                    ["taskset", "-c", str(core), sys.executable, __file__, "--child", work, "--repeats", str(repeats),
                     "--barrier", str(barrier), "--parties", str(len(cores))], env=env, stdout=out, stderr=err))
        while any(process.poll() is None for process in processes):
            if any(process.returncode for process in processes):
                for process in processes:
                    process.kill()
            time.sleep(0.1)
        for core, process in zip(cores, processes):
            if process.returncode != 0:
                raise RuntimeError(f"core_scaling child on core {core} failed (exit status {process.returncode}):\n"
                                   f"{(barrier / f'err-{core}').read_text()[-3000:]}")
        return [json.loads((barrier / f"out-{core}").read_text().strip().splitlines()[-1])["seconds"] for core in cores]
    finally:
        shutil.rmtree(barrier)


def measure(args) -> dict:
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("core_scaling needs two cores (run it under taskset -c 0,1 or unpinned)")
    report = {"rounds": args.rounds, "repeats": args.repeats, "works": {}}
    for work in args.works.split(","):
        alone, together = [], []
        for round_number in range(args.rounds):
            _harness.log(f"{work}: round {round_number + 1}/{args.rounds}")
            alone.append(statistics.median(launch([0], work, args.repeats)[0]))
            together.append(statistics.median(statistics.median(s) for s in launch([0, 1], work, args.repeats)))
        ratios = [2 * a / t for a, t in zip(alone, together)]
        report["works"][work] = {"alone_seconds": alone, "together_seconds": together, "speedups": ratios}
    print(f"\n{'work':8s} {'one process, s/call':>22s} {'two at once, s/call':>22s} {'2 x alone / together':>22s}")
    for work, result in report["works"].items():
        alone, together, ratios = result["alone_seconds"], result["together_seconds"], result["speedups"]
        print(f"{work:8s} {statistics.median(alone):10.4f} ({min(alone):.4f}-{max(alone):.4f}) "
              f"{statistics.median(together):10.4f} ({min(together):.4f}-{max(together):.4f}) "
              f"{statistics.median(ratios):10.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
    return report


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, threads=None, rounds=3)
    parser.add_argument("--works", default=",".join(WORKS), help=f"comma-separated, of {WORKS}")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per process and round")
    parser.add_argument("--child", choices=WORKS, help=argparse.SUPPRESS)
    parser.add_argument("--barrier", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--parties", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.repeats, args.barrier, args.parties)))
        return 0
    unknown = set(args.works.split(",")) - set(WORKS)
    if unknown:
        parser.error(f"--works: unknown {sorted(unknown)}; choose from {WORKS}")
    return _harness.main(measure, args)


if __name__ == "__main__":
    sys.exit(main())
