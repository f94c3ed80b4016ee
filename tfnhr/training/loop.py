"""Training a recognizer (what ``tfnhr train`` runs).

Wenniger et al. 2019, §VI: CTC loss, Adam (lr 0.005), gradient-norm clipping 10,
:class:`~tfnhr.training.callbacks.LearningRateHalving` on validation CER/WER (armed only once the
model has left CTC's blank phase), at most 80 epochs, the best model kept; plus training-time
augmentation (:mod:`tfnhr.data.augment`), with a time limit the learning rate annealed over its
second half (:class:`~tfnhr.training.callbacks.TimeBudgetAnnealing`), a moving average of the
weights validated and kept instead of the last update's (:mod:`tfnhr.training.averaging`), and,
optionally, validation every N updates.

Files written to ``out``:
``best.keras`` (lowest validation CER; written atomically), ``last.keras`` + ``state.json`` (after
every validation, for ``resume``), ``log.csv`` (one row per validation), ``curves.png`` (loss and
validation CER), ``tensorboard/``, ``charset.json``, ``summary.json``.

A run whose validation CER stays near 100 % while its loss falls (stuck in CTC's all-blank phase)
says so at the end and in ``summary.json`` (``collapsed``).

:class:`TrainingHooks` are the points where a caller changes how :func:`train` runs: the
defaults are one process; ``horovod_jobs.train`` passes hooks that train on several workers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import keras
import tensorflow as tf

from tfnhr.config.choices import example_noun
from tfnhr.config.options import OptionError
from tfnhr.charset import Charset
from tfnhr.data.augment import make_augmenter
from tfnhr.data.batches import auto_batch_pixels
from tfnhr.data.dataset import Augment, make_dataset
from tfnhr.data.samples import TextImageSet, ctc_min_widths, drop_infeasible
from tfnhr.data.sources import load_data_subset
from tfnhr.data.spacing import median_spacing, normalize_spacing
from tfnhr.evaluation.metrics import reference_sizes
from tfnhr.models.config_network import build_config_network
from tfnhr.models.ctc_model import CtcModel
from tfnhr.models.recognizer import build_recognizer
from tfnhr.models.saving import load_recognizer
from tfnhr.network.errors import NetworkConfigError
from tfnhr.evaluation.plots import plot_curves
from tfnhr.models.precision import dtype_policy, mixed_policy_name
from tfnhr.training.averaging import WeightAveraging
from tfnhr.training.callbacks import (BestCheckpoint, EpochLog, LearningRateHalving, ResumeState,
                                      TimeBudgetAnnealing, TimeLimit, ValidationErrorRates)
from tfnhr.config.train_options import TrainOptions

RESUME_FILES = ("last.keras", "state.json")
RUN_FILES = ("best.keras", *RESUME_FILES, "log.csv", "summary.json", "curves.png")
"""What a run writes once it has trained and validated; a folder holding any of them is a run
(see :func:`claim_run_folder`)."""
START_FILES = ("charset.json", "tensorboard")
"""What a run writes as training starts: left alone by a run that failed before its first
validation, they belong to no run and the next run in the folder replaces them."""


def make_optimizer(spec: str | dict, learning_rate: float, clipnorm: float | None):
    """The Keras optimizer a config's ``optimizer`` names, with ``learning_rate`` and global-norm
    clipping ``clipnorm`` (``None``: none)."""
    options = dict(spec) if isinstance(spec, dict) else {"class": spec}
    name = options.pop("class").lower()
    classes = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD, "rmsprop": keras.optimizers.RMSprop,
               "nadam": keras.optimizers.Nadam, "adagrad": keras.optimizers.Adagrad,
               "adadelta": keras.optimizers.Adadelta}
    try:
        return classes[name](learning_rate=learning_rate, global_clipnorm=clipnorm, **options)
    except (TypeError, ValueError) as error:
        raise NetworkConfigError(f"optimizer {name!r}: {error}") from None


def load_subset(options: TrainOptions, subset: str, limit: int | None) -> TextImageSet:
    """The ``subset`` ("train"/"val"/"test") of the options' data (IAM folder or HDF5 file),
    images in memory."""
    return load_data_subset(options.data, subset, kind=options.kind, split=options.split,
                            keep_err=options.keep_err, height=options.height, limit=limit,
                            progress=options.verbose > 0)


class TrainingHooks:
    """Where :func:`train` asks its caller; this base class trains in one process (``tfnhr train``).

    ``writes``: whether this process writes the output folder (models, logs, charset, summary).
    """

    writes = True

    def prepare_model(self, model: CtcModel) -> None:
        """Called with the compiled model (new or resumed) before training (e.g. to replace its
        optimizer); nothing by default."""

    def train_data(self, data: TextImageSet, charset: Charset, options: TrainOptions,
                   first_epoch: int, augment: Augment | None = None) -> tf.data.Dataset:
        """The training batches: one pass per epoch, epochs counted from ``first_epoch``, each
        image passed through ``augment`` (``None``: as it is)."""
        return make_dataset(data, charset, options.batch_pixels, shuffle=True, seed=options.seed,
                            first_epoch=first_epoch, augment=augment, sort_window=options.sort_window)

    def validation(self, data: TextImageSet, options: TrainOptions) -> keras.callbacks.Callback:
        """The callback that adds ``val_cer``/``val_wer`` (of all of ``data``) to each epoch's logs."""
        return ValidationErrorRates(data, options.batch_pixels)

    def time_limit(self, seconds: float) -> TimeLimit:
        """The callback that stops training after the epoch that passes ``seconds``."""
        return TimeLimit(seconds)

    def callbacks(self, callbacks: list[keras.callbacks.Callback]) -> list[keras.callbacks.Callback]:
        """``fit``'s callback list, given :func:`train`'s own (validation first, the time limit last)."""
        return callbacks

    def threads(self) -> int:
        """TensorFlow threads when the options leave them open (``threads=None``): every core this
        process may use."""
        return len(os.sched_getaffinity(0))


def model_name(options: TrainOptions) -> str:
    """What the run trains, for its messages: the config file, or the preset with the sizes that
    override it (``"small-wide, units (4, 16, 50)"``)."""
    if options.network_source:
        return options.network_source
    sizes = [f"{what} {tuple(value)}" for what, value in (("units", options.mdlstm_units),
                                                          ("filters", options.conv_filters)) if value]
    return ", ".join([options.preset, *sizes])


@contextlib.contextmanager
def data_warnings(hooks: TrainingHooks) -> Iterator[None]:
    """Warnings about the data (files skipped, examples dropped) as usual in the process that
    writes the run, silenced in the others: every Horovod worker loads the same set, and one
    report per job is enough."""
    with warnings.catch_warnings():
        if not hooks.writes:
            warnings.simplefilter("ignore")
        yield


def use_threads(options: TrainOptions, hooks: TrainingHooks) -> None:
    """Size TensorFlow's thread pools to ``options.threads`` (``None``: ``hooks.threads()``; 0:
    leave TensorFlow's default) unless TensorFlow already runs, whose pools are then fixed."""
    threads = hooks.threads() if options.threads is None else options.threads
    if threads:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError:  # TensorFlow was initialised before: its pools stay
            pass


def train(options: TrainOptions, hooks: TrainingHooks | None = None) -> dict:
    """Train (or resume) as ``options`` say; returns the summary (also in ``summary.json``)."""
    hooks = hooks or TrainingHooks()
    out = Path(options.out)
    start_run(options, hooks)
    started = time.monotonic()
    with data_warnings(hooks):
        train_set = load_subset(options, "train", options.max_train)
        val_set = load_subset(options, "val", options.max_val)
    state = _resume_state(out) if options.resume else None
    model, best_weights = resumed_model(out) if state is not None else new_model(options, train_set)
    model.confidence_penalty = options.confidence_penalty  # a training setting, not saved with the model
    hooks.prepare_model(model)
    loaded_examples = len(train_set)
    with data_warnings(hooks):
        train_set = trainable_lines(train_set, model)
    open_run_folder(options, hooks, model.charset)
    if options.batch_pixels is None:
        options = dataclasses.replace(options, batch_pixels=auto_batch_pixels(train_set.pixels()))
    initial_epoch = state["epoch"] if state else 0
    floors = ctc_min_widths(train_set, model.charset, model.width_reduction)
    train_data = hooks.train_data(train_set, model.charset, options, initial_epoch,
                                  augment=make_augmenter(options.augment, options.seed, floors))
    fit_rounds = _rounds(train_data, options, initial_epoch)
    halving = LearningRateHalving(options.halve_on, initial_state=state and state["halving"],
                                  best_weights=best_weights, start_below=options.halve_start,
                                  patience=max(options.halve_patience, fit_rounds["per_epoch"]),
                                  margin=options.halve_margin, units=reference_sizes(val_set.texts))
    time_limit = hooks.time_limit(float("inf") if options.time_limit is None else 60 * options.time_limit)
    callbacks = training_callbacks(options, hooks, val_set, halving, time_limit, resumed=state is not None)
    if options.verbose:
        print(f"training {describe_run(options, model, len(train_set), len(val_set))}; "
              f"{fit_rounds['what']} {initial_epoch + 1}..{fit_rounds['epochs']}", flush=True)
    history = model.fit(fit_rounds["data"], epochs=fit_rounds["epochs"], steps_per_epoch=fit_rounds["steps"],
                        initial_epoch=initial_epoch, shuffle=False, callbacks=callbacks,
                        verbose=_keras_verbosity(options.verbose))
    best_model, collapse = out / "best.keras", blank_phase_collapse(history.history)
    summary = {
        "stop_reason": stop_reason(halving, time_limit, options, fit_rounds["epochs"]),
        "epochs_run": len(history.epoch),
        "last_epoch": (history.epoch[-1] + 1) if history.epoch else initial_epoch,
        "best_epoch": halving.best and halving.best["epoch"],
        "best_val_cer": halving.best and halving.best["val_cer"],
        "best_val_wer": halving.best and halving.best["val_wer"],
        "halvings": halving.halvings,
        "collapsed": collapse is not None,
        "stopped_by_time_limit": time_limit.stopped_early,
        "train_examples": len(train_set),
        "train_dropped_too_narrow": loaded_examples - len(train_set),
        "val_examples": len(val_set),
        "stroke_spacing": model.stroke_spacing,
        "batch_pixels": options.batch_pixels,
        "parameters": model.count_params(),
        "seconds": round(time.monotonic() - started, 1),
        "model": str(best_model) if best_model.is_file() else None,
    }
    finish_run(options, hooks, summary, collapse)
    return summary


def start_run(options: TrainOptions, hooks: TrainingHooks) -> None:
    """Before anything is read: check that ``options.out`` may take the run (refusing an earlier
    run there unless resumed or overwritten), size the thread pools and seed every generator.
    Nothing is written until :func:`open_run_folder`."""
    claim_run_folder(Path(options.out), options.resume, options.overwrite)
    use_threads(options, hooks)
    keras.utils.set_random_seed(options.seed)


def open_run_folder(options: TrainOptions, hooks: TrainingHooks, charset: Charset) -> None:
    """Once the data are read and the model is built, just before training: make ``options.out``
    (on the process that writes), delete what an earlier run left there when not resuming (its
    :data:`START_FILES`; its :data:`RUN_FILES` too with ``overwrite``) and write ``charset.json``."""
    if not hooks.writes:
        return
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    if not options.resume:
        for name in (*START_FILES, *(RUN_FILES if options.overwrite else ())):
            if (out / name).is_dir():
                shutil.rmtree(out / name)
            elif (out / name).exists():
                (out / name).unlink()
    charset.save(out / "charset.json")


def new_model(options: TrainOptions, train_set: TextImageSet) -> tuple[CtcModel, None]:
    """A compiled model that ``options`` describe (a config file's network or the hand-built
    recognizer), its charset from ``train_set``'s texts and, with ``normalize_spacing``, their
    stroke spacing; and no best weights yet."""
    charset = Charset.from_texts(train_set.texts)
    with dtype_policy(mixed_policy_name() if options.mixed_precision else None):
        if options.network is not None:
            model = build_config_network(options.network, charset, input_height=options.height)
        else:
            model = build_recognizer(charset, options.mdlstm_units, options.conv_filters, options.block,
                                     options.dropout, options.cell, preset=options.preset,
                                     input_height=options.height)
        # jit_compile=False: Keras' "auto" means XLA for the whole step on GPU hosts, which ragged
        # batches of changing sizes cannot take (the MDLSTM scan and the planner use XLA themselves)
        model.compile(optimizer=make_optimizer(options.optimizer, options.learning_rate, options.clipnorm),
                      jit_compile=False)
    if options.normalize_spacing:  # validation reads through the model's own preprocessing
        model.stroke_spacing = median_spacing(train_set.images)
    return model, None


def resumed_model(out: Path) -> tuple[CtcModel, list]:
    """The run in ``out`` to continue: ``last.keras`` (optimizer state included) and the weights
    of ``best.keras``, the halving's best."""
    return load_recognizer(out / "last.keras"), load_recognizer(out / "best.keras").get_weights()


def trainable_lines(train_set: TextImageSet, model: CtcModel) -> TextImageSet:
    """``train_set`` as ``model`` trains on it: stroke-spacing normalized if the model keeps a
    spacing (never narrower than a line's CTC floor), then without the lines too narrow for their
    transcription (counted and warned about by :func:`~tfnhr.data.samples.drop_infeasible`)."""
    if model.stroke_spacing is not None:
        floors = ctc_min_widths(train_set, model.charset, model.width_reduction)
        train_set = dataclasses.replace(train_set, images=[
            normalize_spacing(gray, model.stroke_spacing, floor) for gray, floor in zip(train_set.images, floors)])
    return drop_infeasible(train_set, model.charset, model.width_reduction)


def training_callbacks(options: TrainOptions, hooks: TrainingHooks, val_set: TextImageSet,
                       halving: LearningRateHalving, time_limit: TimeLimit, resumed: bool
                       ) -> list[keras.callbacks.Callback]:
    """``fit``'s callbacks in their order: the weight average first (validation, checkpoints and
    the halving see it), the validation, the annealing (with a time limit), the halving, the
    writers of ``options.out`` (when ``hooks.writes``) and the time limit, as ``hooks`` adapt them."""
    out = Path(options.out)
    writers = [
        BestCheckpoint(out / "best.keras", best_cer=halving.best["val_cer"] if halving.best else float("inf")),
        EpochLog(str(out / "log.csv"), append=resumed),
        keras.callbacks.TensorBoard(str(out / "tensorboard"), write_graph=False, profile_batch=0),
        ResumeState(out, halving),
    ]
    annealing = ([TimeBudgetAnnealing(time_limit, options.anneal)]
                 if options.time_limit is not None and options.anneal is not None else [])
    averaging = [WeightAveraging(options.ema)] if options.ema is not None else []
    return hooks.callbacks([*averaging, hooks.validation(val_set, options), *annealing, halving,
                            *(writers if hooks.writes else []), time_limit])


def describe_run(options: TrainOptions, model: CtcModel, train_examples: int, val_examples: int) -> str:
    """What is trained, on what and how, for the line printed before training starts."""
    every = f"every {options.validate_every} updates" if options.validate_every else "every epoch"
    spacing = "as written" if model.stroke_spacing is None else f"{model.stroke_spacing:.3f} of the height"
    return (f"{model_name(options)} recognizer ({model.count_params():,} parameters, {len(model.charset)} characters) "
            f"on {train_examples} {example_noun(options.kind)} (augmentation: {options.augment}, "
            f"weight average: {'none' if options.ema is None else options.ema}, "
            f"confidence penalty: {options.confidence_penalty:g}, stroke spacing: {spacing}), "
            f"batches of up to {options.batch_pixels:,} pixels, validating on {val_examples} {every}")


def finish_run(options: TrainOptions, hooks: TrainingHooks, summary: dict, collapse: str | None) -> None:
    """Write ``summary.json`` and ``curves.png`` (when ``hooks.writes``), print the summary table
    and warn once per job about a run that never left CTC's blank phase (``collapse``)."""
    out = Path(options.out)
    if hooks.writes:
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        plot_curves(out / "log.csv", out / "curves.png", title=f"{model_name(options)} recognizer")
    if options.verbose:
        print_table(summary)
    if collapse is not None and hooks.writes:  # one warning per job, not one per Horovod worker
        warnings.warn(collapse, stacklevel=3)


def claim_run_folder(out: Path, resume: bool, overwrite: bool) -> None:
    """Check that training may write into ``out``: a folder holding an earlier run
    (:data:`RUN_FILES`) needs ``resume`` (continue it) or ``overwrite`` (replace it; its files are
    deleted by :func:`open_run_folder`, once the new run is about to train);
    :class:`~tfnhr.config.options.OptionError` naming both otherwise. A new or empty folder, one
    with other files, or one that a failed start left (:data:`START_FILES` only) is fine."""
    earlier = [name for name in RUN_FILES if (out / name).exists()]
    if earlier and not resume and not overwrite:
        raise OptionError("{path} already holds a training run ({files}): continue it with {resume}, replace it "
                          "with {overwrite}, or choose another {out}", path=out,
                          files=", ".join(earlier), resume=("resume=True", "--resume"),
                          overwrite=("overwrite=True", "--overwrite"), out=("out folder", "--out"))


def stop_reason(halving: LearningRateHalving, time_limit: TimeLimit, options: TrainOptions, epochs: int) -> str:
    """Why training ended, in words: the learning-rate floor, the time limit or all epochs run."""
    if halving.floor_reached is not None:
        return (f"learning-rate floor: at epoch {halving.floor_reached} halving would have taken the learning rate "
                f"below {halving.min_learning_rate:g}")
    if time_limit.stopped_early:
        return f"time limit: {options.time_limit:g} min passed"
    return f"epochs: all {epochs} {'validation rounds' if options.validate_every else 'epochs'} run"


def _rounds(train_data: tf.data.Dataset, options: TrainOptions, initial_epoch: int) -> dict:
    """What ``fit`` runs: ``{"data", "epochs", "steps", "what", "per_epoch"}``. Without
    ``validate_every``, an epoch is one pass over the data; with it, the data repeats and an epoch
    of ``fit`` (a "validation round") is ``validate_every`` updates (at most one pass), as many
    rounds as ``options.epochs`` passes take (rounded up). ``per_epoch``: validations per pass
    over the data, the least patience of the halving (it waits for an epoch's worth of evidence,
    as the paper's rule does, not for a few noisy validations).

    Data of known length always repeats, with ``fit``'s steps per epoch set: given a finite
    dataset, ``fit`` builds a new iterator at every epoch, and the first batch after it waited
    14.8-15.8 s of a 40 s epoch on 800 lines (one worker, one thread, 2-vCPU machine;
    docs/lab/horovod.md); a repeated dataset's pipeline runs straight on into the next epoch
    (its plan and first batches are made while the epoch end validates)."""
    steps = int(train_data.cardinality())
    if options.validate_every is None:
        if steps < 1:  # unknown length: one pass per epoch, as the data gives it
            return {"data": train_data, "epochs": options.epochs, "steps": None, "what": "epochs", "per_epoch": 1}
        return {"data": train_data.repeat(), "epochs": options.epochs, "steps": steps, "what": "epochs", "per_epoch": 1}
    if steps < 1:
        raise ValueError("validate_every needs training data of known length")
    every = min(options.validate_every, steps)
    rounds = math.ceil(options.epochs * steps / every)
    return {"data": train_data.repeat(), "epochs": max(rounds, initial_epoch + 1), "steps": every,
            "what": f"validation rounds of {every} updates ({steps} per epoch)", "per_epoch": math.ceil(steps / every)}


BLANK_PHASE_CER = 0.9
"""A validation CER at or above this reads (almost) nothing: CTC's blank phase or noise."""


def blank_phase_collapse(history: dict[str, list[float]]) -> str | None:
    """A one-line diagnosis if the run never left CTC's blank phase although it trained: every
    validation after the first at or above :data:`BLANK_PHASE_CER` while the training loss fell
    to at most 70 % of its first value; ``None`` otherwise (or with fewer than 3 validations).
    ``history``: Keras' ``History.history`` (``loss`` and ``val_cer`` per validation)."""
    cers, losses = history.get("val_cer", []), history.get("loss", [])
    if len(cers) < 3 or len(losses) < 3 or min(cers[1:]) < BLANK_PHASE_CER or not losses[-1] <= 0.7 * losses[0]:
        return None
    return (f"collapsed: the validation CER stayed at {min(cers[1:]):.1%} or more in all {len(cers)} validations "
            f"while the training loss fell from {losses[0]:.3g} to {losses[-1]:.3g}: the model emits blanks "
            f"(CTC's blank phase). Train longer with --halve-on never, or check the labels and the image height")


def _keras_verbosity(verbose: int) -> int:
    """Keras ``fit`` verbosity: a progress bar on a terminal, one line per epoch in logs."""
    return 0 if not verbose else 1 if sys.stdout.isatty() else 2


def _resume_state(out: Path) -> dict | None:
    """The saved state in ``out``; ``None`` if nothing was saved there yet."""
    if not all((out / name).exists() for name in RESUME_FILES):
        missing = [name for name in RESUME_FILES if not (out / name).exists()]
        print(f"--resume: nothing to resume in {out} (missing {', '.join(missing)}); starting fresh", flush=True)
        return None
    return json.loads((out / "state.json").read_text())


def print_table(summary: dict) -> None:
    """The end-of-training summary as an aligned two-column table."""
    for key, value in summary.items():
        shown = f"{value:.2%}" if isinstance(value, float) and key.startswith("best_val") else value
        print(f"{key:<24} {shown}")
