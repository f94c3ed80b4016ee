"""``train.py --task nhr|mlcn``: train the recognizer or a CapsNet/MLCN on every worker of a Horovod job.

Launch (details, several hosts, Open MPI and Docker in ``docs/horovod.md``)::

    horovodrun -np 2 -H localhost:2 --gloo python train.py --task nhr --data data/iam --out runs/nhr
    horovodrun -np 2 -H localhost:2 --gloo python train.py --task mlcn --devices cpu:0,cpu:1 --out runs/mlcn
    horovodrun -np 2 -H localhost:2 --gloo python train.py --task mlcn --parallel model --out runs/mlcn-model
    python train.py --task nhr --data data/iam    # one plain process: a world of one

``--task nhr`` takes the options of ``tfnhr train`` and runs :func:`tfnhr.training.train`,
``--task mlcn`` those of ``capsnet train`` and runs :func:`capsnet.training.train` (its lanes
placed on each worker's own ``--devices``: model parallel inside a worker, data parallel across
workers), both with the hooks of :mod:`horovod_jobs.train_hooks`. The options below add how the
workers synchronise. ``--task mlcn --parallel model`` spreads the lanes over the ranks instead
(:mod:`horovod_jobs.model_parallel`; ``--data-groups G`` makes G data-parallel replicas of
size / G ranks each), with ``--devices`` the devices each rank offers its lanes. Every rank
checks first that all ranks parsed the same options (and, once loaded, hold the same data), so a
mismatch fails at once on every rank; only rank 0 prints and writes ``--out``. Exit status 2 with a one-line reason per rank for bad options or data.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tfnhr.config.choices import SYNC_MODES
from tfnhr.config.options import DefaultsHelpFormatter, command_line_message
from tfnhr.runtime.console import quiet_libraries

if TYPE_CHECKING:  # at run time imported late: they load TensorFlow
    import keras

    from horovod_jobs.distributed import Workers
    from horovod_jobs.train_hooks import SyncOptions

TASKS = ("nhr", "mlcn")
PEER_FAILURES = ("Horovod has been shut down", "Timed out waiting", "Connection closed by peer",
                 "Connection reset by peer")
"""What a collective's error says when a peer died or stopped answering: Horovod's own message once its
background loop has stopped, or Gloo's transport error when the collective itself times out
(``HOROVOD_GLOO_TIMEOUT_SECONDS``) or loses its socket; which one a rank sees depends on timing."""
PARALLEL_MODES = ("data", "model")
DEFAULT_AVERAGE_EVERY = 16
RECOGNIZER_CPU_CYCLE_TIME_MS = 5.0
"""Horovod's cycle for ``--task nhr`` without GPUs (Horovod's default before 0.21, 1 ms since):
one allreduce per 0.3-0.5-s step waits at most 5 ms more, and the polling's share of each core
falls from 9-16 % to 4-6 %; 2 workers x 1 thread on 2 cores trained 55.0 instead of 49.5
lines/s (docs/lab/horovod.md, "Horovod's polling"). The MLCN task keeps Horovod's default: its
model-parallel steps run many collectives in a row, each of which would wait for a cycle."""


def _task_parser(required: bool, **kwargs) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="train.py", **kwargs)
    parser.add_argument("--task", choices=TASKS, required=required,
                        help="nhr: the MDLSTM recognizer (the options of `tfnhr train`); mlcn: CapsNet or "
                             "MLCN (the options of `capsnet train`); with --help, shows that task's options")
    return parser


def add_distributed_arguments(parser: argparse.ArgumentParser) -> None:
    """How the workers keep in step (read by :func:`sync_options`)."""
    group = parser.add_argument_group("distribution")
    group.add_argument("--sync", choices=SYNC_MODES, default="gradients",
                       help="gradients: average the gradients every step (synchronous data parallelism); "
                            "average: local steps, parameters averaged every --average-every steps and "
                            "at each epoch end (model averaging)")
    group.add_argument("--average-every", type=int, default=DEFAULT_AVERAGE_EVERY,
                       help="--sync average: optimizer steps between parameter averagings")
    group.add_argument("--scale-lr", action="store_true",
                       help="multiply the learning rate by the number of workers (the global batch grows "
                            "with them; meant for --sync gradients)")
    group.add_argument("--warmup-steps", type=int, default=0,
                       help="with --scale-lr: raise the learning rate linearly from the unscaled one over "
                            "the first N steps of the run")
    group.add_argument("--watchdog", type=float, default=1800.0, metavar="SECONDS",
                       help="seconds without a finished batch after which a worker exits (a stuck peer); "
                            "must exceed the first step and the epoch-end validation; 0: off")


def build_parser(task: str | None) -> argparse.ArgumentParser:
    """The parser of ``train.py --task TASK`` (``None``: only the common options)."""
    parser = _task_parser(True, description="Train the recognizer (--task nhr) or a CapsNet/MLCN (--task mlcn) "
                                            "on every worker of a Horovod job, or in one plain process.",
                          epilog="Launch: horovodrun -np 2 -H localhost:2 --gloo python train.py --task nhr "
                                 "--data DIR ... (see docs/horovod.md)",
                          formatter_class=DefaultsHelpFormatter)
    add_distributed_arguments(parser)
    if task == "nhr":
        from tfnhr.config.train_options import add_train_arguments

        add_train_arguments(parser)
    elif task == "mlcn":
        from capsnet.arguments import add_train_arguments

        add_train_arguments(parser)
        add_model_parallel_arguments(parser)
    return parser


def add_model_parallel_arguments(parser: argparse.ArgumentParser) -> None:
    """``--task mlcn``: data or model parallel, and the replicas of the latter."""
    group = parser.add_argument_group("MLCN model parallelism")
    group.add_argument("--parallel", choices=PARALLEL_MODES, default="data",
                       help="data: every rank holds the whole model (its lanes on its own --devices) and "
                            "trains on its slice of each epoch; model: the lanes are spread over the ranks "
                            "(placed by --placement over every rank's --devices), each rank holds only its "
                            "lanes, all ranks of a replica train on the same batches")
    group.add_argument("--data-groups", type=int, default=1, metavar="G",
                       help="--parallel model: G replicas of (ranks / G) ranks each, data parallel between "
                            "them (e.g. -np 8 --data-groups 2: 2 replicas x 4 lane groups)")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``--task`` first (it selects the other options), then everything."""
    task = _task_parser(False, add_help=False).parse_known_args(argv)[0].task
    parser = build_parser(task)
    args = parser.parse_args(argv)
    if args.average_every < 1 or args.warmup_steps < 0 or args.watchdog < 0:
        parser.error("--average-every must be >= 1, --warmup-steps and --watchdog >= 0")
    if args.warmup_steps and not args.scale_lr:
        parser.error("--warmup-steps warms up to the scaled learning rate: add --scale-lr")
    if model_parallel(args):
        if args.model != "mlcn" or args.sync != "gradients":
            parser.error("--parallel model spreads MLCN lanes and synchronises gradients: it needs "
                         "--model mlcn and --sync gradients")
        if args.data_groups < 1:
            parser.error("--data-groups must be >= 1")
    elif args.task == "mlcn" and args.data_groups != 1:
        parser.error("--data-groups G makes replicas of a model-parallel MLCN: add --parallel model")
    return args


def model_parallel(args: argparse.Namespace) -> bool:
    """Whether the job spreads MLCN lanes over the ranks (``--task mlcn --parallel model``)."""
    return args.task == "mlcn" and args.parallel == "model"


def job_config(args: argparse.Namespace) -> dict:
    """The parsed options that every rank must share (for ``check_same_config``)."""
    return {name: value for name, value in vars(args).items() if not callable(value)}


def sync_options(args: argparse.Namespace) -> SyncOptions:
    """:class:`~horovod_jobs.train_hooks.SyncOptions` of the parsed options."""
    from horovod_jobs.train_hooks import SyncOptions

    return SyncOptions(args.sync, args.average_every, args.warmup_steps, args.watchdog)


def resume_view(out: Path) -> dict:
    """What this rank finds to resume from in ``out``: which files, and the saved state. Every rank
    loads them, so ``--out`` must be shared (or copied to every host); otherwise the ranks would
    start from different epochs."""
    from tfnhr.training import RESUME_FILES

    state = out / "state.json"
    return {"files": [name for name in (*RESUME_FILES, "best.keras") if (out / name).is_file()],
            "state": state.read_text() if state.is_file() else None}


def run_nhr(args: argparse.Namespace, workers: Workers, callbacks: Sequence[keras.callbacks.Callback] = ()) -> dict:
    """``tfnhr train`` on every worker, ``callbacks`` added to ``fit``'s; returns the summary."""
    from horovod_jobs.distributed import check_same_config, scale_learning_rate
    from horovod_jobs.train_hooks import RecognizerHooks
    from tfnhr.training import options_from_args
    from tfnhr.training import train, use_threads

    options = options_from_args(args)
    hooks = RecognizerHooks(workers, sync_options(args), callbacks)
    # First: the threads, which TensorFlow fixes at its first op (the config check runs one).
    use_threads(options, hooks)
    check_same_config({**job_config(args), "network": options.network,
                       "resume": resume_view(args.out) if args.resume else None}, what="training options")
    if args.scale_lr:
        options = dataclasses.replace(options, learning_rate=scale_learning_rate(options.learning_rate, workers.size))
    return train(options, hooks)


def run_mlcn(args: argparse.Namespace, workers: Workers, callbacks: Sequence[keras.callbacks.Callback] = ()) -> dict:
    """``capsnet train`` on every worker, ``callbacks`` added to ``fit``'s; returns the summary."""
    from capsnet.arguments import config_from_args
    from capsnet.training import prepare, train
    from horovod_jobs.distributed import check_same_config, scale_learning_rate
    from horovod_jobs.train_hooks import ClassifierHooks, data_digest

    config = config_from_args(args)
    # First: it sets TensorFlow's threads and devices, before any op.
    setup = prepare(config, build_model=not model_parallel(args))
    check_same_config({**job_config(args), "data": data_digest(setup.data), "first_epoch": setup.first_epoch},
                      what="training options and data")
    if model_parallel(args):
        from horovod_jobs.model_parallel import RankGroups, build_shard, make_process_sets
        from horovod_jobs.train_hooks import ModelParallelHooks

        layout = RankGroups(workers.rank, workers.size, args.data_groups)
        hooks = ModelParallelHooks(workers, sync_options(args), layout, callbacks)
    else:
        hooks = ClassifierHooks(workers, sync_options(args), callbacks)
    if args.scale_lr:  # the schedule's start
        config = dataclasses.replace(config, lr=scale_learning_rate(config.lr, hooks.replicas))
    if model_parallel(args):
        setup = build_shard(config, setup, layout, make_process_sets(layout))
    else:
        hooks.distribute(setup.model)
    return train(config, setup, hooks)


def peer_failure(message: str) -> str | None:
    """The marker of ``PEER_FAILURES`` that an error ``message`` contains, or None when it names no peer failure."""
    return next((marker for marker in PEER_FAILURES if marker in message), None)


def main(argv: Sequence[str] | None = None, callbacks: Sequence[keras.callbacks.Callback] = ()) -> int:
    """Entry point (``python train.py ...``, also under ``horovodrun``); returns the exit status.
    ``callbacks``: Keras callbacks added last to ``fit``'s (e.g. a benchmark's timer)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # before TensorFlow's first import
    args = parse_args(argv)
    if args.task == "nhr":  # as `tfnhr train` prints: warnings on one line, TensorFlow's Python loggers quiet
        quiet_libraries("train.py --task nhr")
    if args.task == "mlcn":
        from capsnet.environment import prefer_onednn

        prefer_onednn()
    from horovod_jobs.distributed import init_workers
    from horovod_jobs.launcher_stop import LastWord, report_launcher_stop

    several_devices = model_parallel(args) and args.devices is not None
    workers = init_workers(pin_gpu=not several_devices, process_sets=model_parallel(args) and args.data_groups > 1,
                           cpu_cycle_time_ms=RECOGNIZER_CPU_CYCLE_TIME_MS if args.task == "nhr" else None)
    if not workers.is_root:
        sys.stdout = open(os.devnull, "w")  # only rank 0 prints (open for the rest of the process)
    resume = f"; to continue from its last saved state, run the same command with --resume (into {args.out})"
    # a job of several ranks: the launcher stops the others when one ends (one plain process keeps its signals)
    last_word = (report_launcher_stop(f"train.py --task {args.task}: rank {workers.rank} stopped by the launcher: "
                                      f"another rank ended first (its output says why){resume}")
                 if workers.size > 1 else LastWord())
    try:
        (run_nhr if args.task == "nhr" else run_mlcn)(args, workers, callbacks)
    except (FileNotFoundError, ValueError, RuntimeError) as error:
        last_word.say(f"train.py --task {args.task}: error on rank {workers.rank}: {command_line_message(error)}")
        return 2
    except Exception as error:
        cause = peer_failure(str(error))
        if cause is None:
            raise
        last_word.say(f"train.py --task {args.task}: error on rank {workers.rank}: a peer rank died or stopped "
                      f"answering (a collective failed: {cause}); see that rank's output{resume}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
