"""Recognition accuracy of tfnhr vs kraken (the peer HTR toolkit) at equal wall time, on the same
synthetic line set and the same cores.

What it measures: validation and test CER (greedy decoding) of

* **tfnhr**: ``tfnhr train`` with the main job's training flags (``tfnhr.config.options.option_flags``
  of its ``quick`` preset: its ``small-stem`` recognizer without dropout, height 36, 2x2 blocks, 190,000-px
  batches, a validation about every 1,100 training lines, default augmentation, one process on
  every core this process may use) and ``--time-limit MINUTES`` (``--ours-flags`` adds flags),
  then ``tfnhr evaluate --decoders greedy`` of its ``best.keras`` on the val and test subsets,
  each line read once;
* **kraken 7.1.1** ``ketos train`` (``--models``, default both): ``default``, its own default
  VGSL line model (input height 120), and ``same-height``, the same spec string with the input height
  changed to tfnhr's (``tfnhr.config.choices.MAIN_JOB_HEIGHT``, 36 px); each for the same wall time as tfnhr's whole ``tfnhr train``
  process took (``--kraken-minutes`` overrides), stopped with SIGTERM when that time is up; its
  best checkpoint (highest validation accuracy) is then scored by ``ketos test`` on val and test.

The table gives per system: the training process's wall minutes, the passes over the training
lines it made (tfnhr: validation rounds x updates per round / batches per epoch; kraken: optimizer
steps x batch size 1 / training lines), the val and the test CER. Both train with all the cores
this process may use (tfnhr one process with a thread per core, kraken ``ketos --threads N`` with N the allowed
cores), so pin both with ``taskset`` to compare on fewer cores. The CERs differ slightly in
definition: tfnhr's is edit distance / reference length after NFC and whitespace collapsing
(``tfnhr.evaluation.metrics``), kraken's is its test report's errors / characters on the raw transcriptions;
the synthetic texts have single spaces only, so they agree in practice.

**The data.** ``tfnhr synth --out WORK/data-TRAIN-VAL-TEST-sSEED --train N --val V --test T
--seed S`` (default the sizes of the main job's ``quick`` preset, ``tfnhr.config.choices.MAIN_JOB_PRESETS``: training fonts for train, held-out fonts for
val and test; reused when its ``synthetic.json`` matches), then exported for kraken's ``path``
format: ``WORK/data-.../peer/<subset>/<id>.png`` (a copy of the IAM-layout line image, as
rendered, 37-72 px high; kraken scales to its input height itself) with ``<id>.gt.txt`` (the
transcription, no newline) beside it, and a manifest ``peer/<subset>.txt`` of the image paths.

**The peer environment.** kraken and torch live in their own virtualenv, ``build/peer-venv``
(``--peer-venv``), made on the first run and reused: ``pip install kraken==7.1.1``. That pulls
torch 2.14.0 and torchvision 0.29.1 from PyPI, whose Linux x86-64 wheels are the CUDA builds, with
18 ``nvidia-*``/``cuda-*`` wheels and triton: about 6.0 GB installed, 1.7 min here. On a CPU
they run torch's CPU kernels, the same as a CPU build. A CPU-only build does not
work: PyPI has no CPU torch for Linux; this workplace's local wheel folder has
``torch-2.13.0+cpu`` (a 1.6 GB venv), but the only torchvision for it, 0.28.0 from PyPI, is
linked against the CUDA build (``libtorch_cuda.so``), so ``import torchvision`` (which kraken
needs) fails with "operator torchvision::nms does not exist". ``--peer-torch`` installs other
requirements with kraken for a new venv (e.g. a matching CPU torch and torchvision where an
index has both).

**The ketos flags.** What kraken 7.1.1's ``ketos`` needs, as learned from ``--help`` and its
source (``kraken/ketos/recognition.py``, ``kraken/configs/vgsl.py``):

* global options go before the command: ``ketos --threads N`` (OpenMP/BLAS pool, default 1),
  ``--workers W`` (data-loading processes, default 1), ``--device cpu``, ``--seed S``,
  ``--verbose`` (log lines instead of a progress bar; the validation runs are logged as
  ``validation run: total chars C errors E accuracy A``);
* ``ketos train --format-type path`` must be given (the data config's default is ``xml``
  although the option's help differs); ``--training-data FILE`` / ``--evaluation-data FILE`` are
  manifests (one image path a line; with ``-e`` the ``--partition`` split is off); ground truth
  of ``path`` data is ``<image minus extension>.gt.txt``;
* ``--spec`` (``-s``) is the VGSL string; kraken's default (``VGSLRecognitionTrainingConfig``) is
  ``[1,120,0,1 Cr3,13,32 Do0.1,2 Mp2,2 Cr3,13,32 Do0.1,2 Mp2,2 Cr3,9,64 Do0.1,2 Mp2,2 Cr3,9,64
  Do0.1,2 S1(1x0)1,3 Lbx200 Do0.1,2 Lbx200 Do0.1,2 Lbx200 Do]`` (``[batch, height, width 0 =
  variable, channels``); the ``same-height`` run replaces ``120`` by tfnhr's 36 (3 max-pools: 4 rows left);
* stopping: ``--quit early`` (default) with ``--lag 10`` validations without improvement, or
  ``--quit fixed --epochs N``; there is no time limit, hence the SIGTERM (Lightning stops at the
  next step and saves ``checkpoint_abort.ckpt``); ``--freq F`` validates and checkpoints every F
  epochs (F < 1: within an epoch; here ``--kraken-freq``, default 0.25, so at most a quarter
  epoch of training is lost at the stop), and ``--lag`` is scaled to match (``--kraken-lag``,
  default 10 / F: kraken's default patience of 10 epochs; with ``--lag 10`` at F 0.25 it stopped
  tiny runs after 2.5 epochs, still in CTC's blank phase); other defaults: AdamW 1e-3, batch
  size 1, no augmentation (``--kraken-flags`` adds flags, e.g. ``--augment``);
* checkpoints: ``OUTPUT/checkpoint_{epoch:02d}-{val_metric:.4f}.ckpt`` (``-vN`` added when a
  name repeats; the 10 best by val_metric = validation character accuracy); when training ends
  by itself it also converts the best to ``best_{score}.safetensors``;
* ``ketos convert --output W.safetensors CKPT`` turns a checkpoint into a weights file (what
  ``ketos train`` does with its best one at its end; the script scores that file);
* ``ketos test --format-type path --model W --test-data FILE`` prints a
  report with ``<n>\\tCharacters``, ``<n>\\tErrors`` and ``<x>%\\tCharacter Accuracy`` (to stdout,
  and only without ``--verbose``); CER = errors / characters.

Usage::

    python benchmarks/accuracy_vs_peer.py --out build/bench/accuracy_vs_peer.json  # ~52 min (3 x ~15 min + data, scoring)
    python benchmarks/accuracy_vs_peer.py --train 40 --val 10 --test 10 --minutes 0.5 --work build/bench/peer-smoke

Each run keeps its folder under ``--work`` (default ``build/bench/accuracy_vs_peer``): ``ours/``
(``model/best.keras``, ``train.log``, ``val.json``, ``test.json``) and ``kraken-NAME/`` (checkpoints,
``train.log``, ``val.log``, ``test.log``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import _harness

from tfnhr.config.choices import MAIN_JOB_HEIGHT, MAIN_JOB_PRESETS

QUICK = MAIN_JOB_PRESETS["quick"]
"""The main job's ``quick`` preset, whose data sizes and time limit are this benchmark's defaults."""

SUBSETS = ("train", "val", "test")
KRAKEN_VERSION = "7.1.1"
KRAKEN_MODELS = ("default", "same-height")
CHECKPOINT = re.compile(r"checkpoint_(\d+)-(\d+\.\d+)(?:-v\d+)?\.ckpt$")
"""``ketos train``'s checkpoint names: epoch, validation accuracy, and Lightning's ``-vN`` when a
name repeats."""
KRAKEN_PATIENCE_EPOCHS = 10
"""kraken's default early stopping: ``--lag 10`` validations at ``--freq 1``, i.e. 10 epochs."""
KRAKEN_ENV = {"COLUMNS": "300"}
"""kraken logs through rich, which wraps at the terminal width (80 columns in a file)."""


# --------------------------------------------------------------------------- the peer environment


def run_logged(command: list[str], log_file: Path, env: dict | None = None, check: bool = True) -> float:
    """Run ``command`` from the repository root, its output into ``log_file``; returns its wall
    seconds. With ``check``, raises RuntimeError with the log's end if it fails."""
    started = time.perf_counter()
    with open(log_file, "w") as log:
        process = subprocess.run(command, cwd=_harness.REPO, stdout=log, stderr=subprocess.STDOUT, check=False,
                                 env=None if env is None else {**os.environ, **env})
    if check and process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)[:300]} failed (exit status {process.returncode}):\n"
                           f"{log_file.read_text()[-4000:]}")
    return time.perf_counter() - started


def peer_python(venv: Path, code: str, *args: str) -> str:
    """stdout of ``code`` run by the peer venv's Python (RuntimeError if it fails)."""
    process = subprocess.run([str(venv / "bin" / "python"), "-c", code, *args], capture_output=True, text=True,
                             check=False)
    if process.returncode != 0:
        raise RuntimeError(f"peer python failed:\n{process.stderr[-3000:]}")
    return process.stdout.strip()


def ensure_peer_venv(venv: Path, extra: list[str]) -> dict:
    """Make ``venv`` with kraken (and the ``extra`` requirements) unless it has a working
    ``ketos`` already; returns what is installed."""
    venv = venv.resolve()
    log_file = venv.parent / f"{venv.name}-install.log"
    installed = {"venv": str(venv), "install_seconds": None}
    ketos_ok = (venv / "bin" / "ketos").exists() and subprocess.run(
        [str(venv / "bin" / "ketos"), "--version"], capture_output=True, check=False).returncode == 0
    if not ketos_ok:
        _harness.log(f"making {venv} with kraken=={KRAKEN_VERSION} (once; about 2 min, 6 GB) ...")
        venv.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        run_logged([str(venv / "bin" / "pip"), "install", "--quiet", f"kraken=={KRAKEN_VERSION}", *extra], log_file)
        installed["install_seconds"] = round(time.perf_counter() - started, 1)
    versions = json.loads(peer_python(venv, "import json, importlib.metadata as m; print(json.dumps("
                                            "{p: m.version(p) for p in ('kraken', 'torch', 'torchvision', 'lightning')}))"))
    installed.update(versions)
    installed["bytes"] = sum(p.stat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink())
    return installed


def kraken_default_spec(venv: Path) -> str:
    """kraken's default VGSL recognition spec, from its installed source."""
    return peer_python(venv, "from kraken.configs.vgsl import VGSLRecognitionTrainingConfig as C; print(C().spec)")


def with_height(spec: str, height: int) -> str:
    """``spec`` with its input height (the second number of ``[batch,height,width,channels``) set."""
    result, count = re.subn(r"^\[(\d+),(\d+),", lambda m: f"[{m.group(1)},{height},", spec.strip())
    if count != 1:
        raise ValueError(f"cannot find the input height in the VGSL spec {spec!r}")
    return result


# --------------------------------------------------------------------------- the data


def make_data(work: Path, counts: dict[str, int], seed: int) -> Path:
    """The synthetic IAM-layout set for ``counts`` and ``seed`` under ``work`` (reused if there)."""
    folder = (work / f"data-{counts['train']}-{counts['val']}-{counts['test']}-s{seed}").resolve()
    marker = folder / "synthetic.json"
    if marker.exists():
        params = json.loads(marker.read_text())
        if (params.get("counts") == counts and params.get("seed") == seed and params.get("kind") == "lines"
                and (folder / "peer" / "done").exists()):
            _harness.log(f"reusing {folder}")
            return folder
    work.mkdir(parents=True, exist_ok=True)
    _harness.log(f"tfnhr synth --train {counts['train']} --val {counts['val']} --test {counts['test']} ...")
    run_logged([sys.executable, "-m", "tfnhr.cli", "synth", "--out", str(folder), "--train", str(counts["train"]),
                "--val", str(counts["val"]), "--test", str(counts["test"]), "--seed", str(seed), "--quiet"],
               work / "synth.log")
    export_for_kraken(folder)
    return folder


def export_for_kraken(folder: Path) -> dict[str, int]:
    """Write ``folder/peer/<subset>/<id>.png`` + ``<id>.gt.txt`` and the manifests
    ``peer/<subset>.txt`` for kraken's ``path`` format; returns lines per subset."""
    from tfnhr.data.sources import folder_samples

    peer = folder / "peer"
    shutil.rmtree(peer, ignore_errors=True)
    written = {}
    for subset in SUBSETS:
        target = peer / subset
        target.mkdir(parents=True)
        paths = []
        for sample in folder_samples(folder, subset, "lines", "official", False):
            if not sample.text.strip():
                continue
            image = target / f"{sample.id}.png"
            shutil.copyfile(sample.image_path, image)
            (target / f"{sample.id}.gt.txt").write_text(sample.text, encoding="utf-8")
            paths.append(str(image))
        (peer / f"{subset}.txt").write_text("".join(f"{path}\n" for path in paths))
        written[subset] = len(paths)
    (peer / "done").write_text(json.dumps(written) + "\n")
    return written


# --------------------------------------------------------------------------- tfnhr


def tfnhr_cli(arguments: list[str], log_file: Path) -> float:
    return run_logged([sys.executable, "-m", "tfnhr.cli", *arguments], log_file)


def train_ours(data: Path, out: Path, minutes: float, seed: int, flags: list[str]) -> dict:
    """tfnhr's run: train, then greedy CER on val and test."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    from tfnhr.commands import main_job
    from tfnhr.config.options import option_flags

    job = main_job.parse_args(["--out", str(out), "--seed", str(seed), "--time-limit", str(minutes)])
    preset = MAIN_JOB_PRESETS[job.preset]
    options = main_job.training_options(job, data, preset["epochs"], minutes, preset["validate_lines"])
    arguments = ["train", *option_flags(options), *flags]
    _harness.log(f"tfnhr: training for {minutes} min ...")
    seconds = tfnhr_cli(arguments, out / "train.log")
    summary = json.loads((options.out / "summary.json").read_text())
    log_text = (out / "train.log").read_text()
    per_epoch = re.search(r"validation rounds of (\d+) updates \((\d+) per epoch\)", log_text)
    updates = passes = None
    if per_epoch:
        updates = summary["epochs_run"] * int(per_epoch.group(1))
        passes = updates / int(per_epoch.group(2))
    else:  # the line is printed unless --quiet
        passes = None
    cers = {}
    for subset in ("val", "test"):
        tfnhr_cli(["evaluate", "--model", str(options.out / "best.keras"), "--data", str(data), "--subset", subset,
                   "--decoders", "greedy", "--json", str(out / f"{subset}.json")], out / f"{subset}.log")
        rows = json.loads((out / f"{subset}.json").read_text())
        cers[subset] = next(row for row in rows if row["decoder"] == "greedy")["cer"]
    return {"system": "tfnhr", "train_seconds": round(seconds, 1), "epochs": passes, "updates": updates,
            "val_cer": cers["val"], "test_cer": cers["test"], "best_val_cer_in_training": summary["best_val_cer"],
            "parameters": summary["parameters"], "collapsed": summary["collapsed"],
            "command": "tfnhr " + " ".join(arguments), "folder": str(out)}


# --------------------------------------------------------------------------- kraken


def run_for(command: list[str], log_file: Path, seconds: float, env: dict) -> dict:
    """Run ``command`` in its own session for at most ``seconds``; then SIGTERM to it (Lightning
    stops at the next step and saves ``checkpoint_abort.ckpt``), after 180 s more SIGKILL to its
    process group (data-loading workers included)."""
    started = time.perf_counter()
    with open(log_file, "w") as log:
        process = subprocess.Popen(command, cwd=_harness.REPO, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, **env}, start_new_session=True)
        stopped = False
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            stopped = True
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        try:  # leftover workers of the session this script started
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return {"seconds": time.perf_counter() - started, "exit_status": process.returncode, "stopped_by_time": stopped}


def best_checkpoint(folder: Path) -> tuple[Path | None, float | None]:
    """The checkpoint with the highest validation accuracy in its name (of equals the first
    written, as kraken's own choice), and that accuracy."""
    found = [(float(match.group(2)), -path.stat().st_mtime, path) for path in folder.glob("checkpoint_*.ckpt")
             if (match := CHECKPOINT.search(path.name))]
    if not found:
        return None, None
    accuracy, _, path = max(found, key=lambda item: item[:2])
    return path, accuracy


def checkpoint_progress(venv: Path, path: Path) -> dict:
    """``{"epoch", "global_step"}`` of a Lightning checkpoint (read by the peer venv's torch)."""
    code = ("import json, sys, torch; c = torch.load(sys.argv[1], map_location='cpu', weights_only=False); "
            "print(json.dumps({'epoch': c.get('epoch'), 'global_step': c.get('global_step')}))")
    return json.loads(peer_python(venv, code, str(path)).splitlines()[-1])


def ketos_test(venv: Path, threads: int, model: Path, manifest: Path, log_file: Path) -> float:
    """CER of ``model`` on the images listed in ``manifest`` from ``ketos test``'s report."""
    run_logged([str(venv / "bin" / "ketos"), "--threads", str(threads), "--device", "cpu", "test",
                "--format-type", "path", "--model", str(model), "--test-data", str(manifest)], log_file,
               env=KRAKEN_ENV)
    text = log_file.read_text()
    chars = re.search(r"^\s*(\d+)\s+Characters\s*$", text, re.M)
    errors = re.search(r"^\s*(\d+)\s+Errors\s*$", text, re.M)
    if not (chars and errors) or int(chars.group(1)) == 0:
        raise RuntimeError(f"no Characters/Errors lines in ketos test's report {log_file}:\n{text[-3000:]}")
    return int(errors.group(1)) / int(chars.group(1))


def kraken_lag(args) -> int:
    """``--lag`` for ``--kraken-freq``: kraken's default patience in epochs, in validations."""
    return args.kraken_lag if args.kraken_lag is not None else math.ceil(KRAKEN_PATIENCE_EPOCHS / args.kraken_freq)


def train_kraken(name: str, spec: str | None, venv: Path, data: Path, out: Path, seconds: float, args,
                 train_lines: int) -> dict:
    """One kraken run: ``ketos train`` for ``seconds``, then ``ketos test`` of its best checkpoint."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    peer = data / "peer"
    threads = len(os.sched_getaffinity(0))
    command = [str(venv / "bin" / "ketos"), "--threads", str(threads), "--workers", str(args.kraken_workers),
               "--device", "cpu", "--seed", str(args.seed), "--verbose", "train", "--format-type", "path",
               "--output", str(out), "--freq", str(args.kraken_freq), "--lag", str(kraken_lag(args)),
               "--training-data", str(peer / "train.txt"), "--evaluation-data", str(peer / "val.txt"),
               *(["--spec", spec] if spec else []), *args.kraken_flags.split()]
    _harness.log(f"kraken {name}: training for {seconds / 60:.1f} min ...")
    ran = run_for(command, out / "train.log", seconds, KRAKEN_ENV)
    log_text = (out / "train.log").read_text(errors="replace")
    validations = [float(value) for value in re.findall(r"validation run: total chars [\d.]+ errors [\d.]+ "
                                                         r"accuracy (?:tensor\()?([0-9.]+)", log_text)]
    best, accuracy = best_checkpoint(out)
    model = best
    if model is None:  # no validation ran in time: score what it had
        model = out / "checkpoint_abort.ckpt" if (out / "checkpoint_abort.ckpt").exists() else None
    if model is None:
        raise RuntimeError(f"kraken {name} left no checkpoint (exit status {ran['exit_status']}):\n{log_text[-4000:]}")
    latest = max(out.glob("*.ckpt"), key=lambda path: path.stat().st_mtime)
    progress = checkpoint_progress(venv, latest)
    steps = progress.get("global_step")
    weights = out / "scored.safetensors"  # as ketos train converts its best checkpoint when it ends by itself
    run_logged([str(venv / "bin" / "ketos"), "convert", "--output", str(weights), str(model)], out / "convert.log",
               env=KRAKEN_ENV)
    cers = {subset: ketos_test(venv, threads, weights, peer / f"{subset}.txt", out / f"{subset}.log")
            for subset in ("val", "test")}
    return {"system": f"kraken {name}", "spec": spec or kraken_default_spec(venv),
            "train_seconds": round(ran["seconds"], 1), "budget_seconds": round(seconds, 1),
            "stopped_by_time": ran["stopped_by_time"], "exit_status": ran["exit_status"],
            "epochs": None if steps is None else steps / train_lines, "updates": steps,
            "completed_epochs": progress.get("epoch"),
            "val_cer": cers["val"], "test_cer": cers["test"],
            "best_val_accuracy_in_training": accuracy, "validation_accuracies": validations,
            "checkpoint": str(model), "scored_best_checkpoint": best is not None,
            "command": "ketos " + " ".join(command[1:]),
            "folder": str(out)}


# --------------------------------------------------------------------------- the benchmark


def measure(args: argparse.Namespace) -> dict:
    models = [name.strip() for name in args.models.split(",") if name.strip()]
    if unknown := set(models) - set(KRAKEN_MODELS):
        raise SystemExit(f"--models: unknown {sorted(unknown)}; choose from {KRAKEN_MODELS}")
    work = args.work.resolve()
    counts = {"train": args.train, "val": args.val, "test": args.test}
    peer = ensure_peer_venv(args.peer_venv, args.peer_torch.split())
    venv = Path(peer["venv"])
    _harness.log(f"peer: kraken {peer['kraken']}, torch {peer['torch']} ({peer['bytes'] / 1e9:.2f} GB)")
    data = make_data(work, counts, args.seed)
    exported = json.loads((data / "peer" / "done").read_text())
    report = {"data": {"folder": str(data), "counts": counts, "seed": args.seed, "kraken_lines": exported},
              "peer": peer, "cores": len(os.sched_getaffinity(0)), "minutes": args.minutes, "runs": []}

    ours = train_ours(data, work / "ours", args.minutes, args.seed, args.ours_flags.split())
    report["runs"].append(ours)
    _harness.log(f"tfnhr: {ours['train_seconds'] / 60:.1f} min, val CER {ours['val_cer']:.2%}, "
                 f"test CER {ours['test_cer']:.2%}")
    budget = 60 * args.kraken_minutes if args.kraken_minutes is not None else ours["train_seconds"]
    report["kraken_budget_seconds"] = budget
    default_spec = kraken_default_spec(venv)
    for name in models:
        spec = None if name == "default" else with_height(default_spec, MAIN_JOB_HEIGHT)
        run = train_kraken(name, spec, venv, data, work / f"kraken-{name}", budget, args, exported["train"])
        report["runs"].append(run)
        _harness.log(f"kraken {name}: val CER {run['val_cer']:.2%}, test CER {run['test_cer']:.2%}")
    print_table(report)
    return report


def print_table(report: dict) -> None:
    counts = report["data"]["counts"]
    print(f"synthetic lines {counts['train']}/{counts['val']}/{counts['test']} (seed {report['data']['seed']}), "
          f"{report['cores']} cores; kraken {report['peer']['kraken']} with torch {report['peer']['torch']}")
    print(f"{'system':<16} {'minutes':>7} {'epochs':>7} {'val CER':>8} {'test CER':>8}")
    for run in report["runs"]:
        epochs = "-" if run["epochs"] is None else f"{run['epochs']:.2f}"
        print(f"{run['system']:<16} {run['train_seconds'] / 60:7.1f} {epochs:>7} {run['val_cer']:8.2%} "
              f"{run['test_cer']:8.2%}")
    for run in report["runs"][1:]:
        if not run["scored_best_checkpoint"]:
            print(f"note: {run['system']} validated no checkpoint in time; its last state was scored")


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, threads=None)
    parser.add_argument("--minutes", type=float, default=QUICK["time_limit"],
                        help=f"tfnhr's training time limit (default {QUICK['time_limit']:g}, the main job's)")
    parser.add_argument("--kraken-minutes", type=float, default=None,
                        help="kraken's wall time per run (default: what tfnhr's training process took)")
    parser.add_argument("--models", default=",".join(KRAKEN_MODELS),
                        help="kraken runs, comma-separated: default (its spec, height 120), same-height (height "
                             f"{MAIN_JOB_HEIGHT}, tfnhr's) (default: default,same-height)")
    for subset, what in (("train", "training"), ("val", "validation"), ("test", "test")):
        parser.add_argument(f"--{subset}", type=int, default=QUICK[subset],
                            help=f"{what} lines (default {QUICK[subset]}, the main job's)")
    parser.add_argument("--seed", type=int, default=0, help="data set and training seed (default 0)")
    parser.add_argument("--work", type=Path, default=Path("build/bench/accuracy_vs_peer"),
                        help="folder of the data and the runs (default build/bench/accuracy_vs_peer)")
    parser.add_argument("--peer-venv", type=Path, default=_harness.REPO / "build" / "peer-venv",
                        help="kraken's virtualenv, made if missing (default build/peer-venv)")
    parser.add_argument("--peer-torch", default="",
                        help="more requirements installed with kraken into a new peer venv, e.g. a CPU torch "
                             "and its torchvision (default: none, what kraken pulls)")
    parser.add_argument("--kraken-freq", type=float, default=0.25,
                        help="kraken's --freq: validate/checkpoint every F epochs (default 0.25)")
    parser.add_argument("--kraken-lag", type=int, default=None,
                        help="kraken's --lag: validations without improvement before it stops (default: "
                             "10 epochs' worth, 10 / --kraken-freq, as kraken's default 10 at --freq 1)")
    parser.add_argument("--kraken-workers", type=int, default=1, help="kraken's data-loading processes (default 1)")
    parser.add_argument("--kraken-flags", default="", help="more ketos train flags, e.g. \"--augment\"")
    parser.add_argument("--ours-flags", default="", help="more tfnhr train flags, e.g. \"--augment none\"")
    return _harness.main(measure, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
