"""Keras callbacks of the recognizer's training (Wenniger et al. 2019, §VI).

Put :class:`ValidationErrorRates` first in the callback list: it adds ``val_cer``/``val_wer`` to
the epoch logs that the callbacks after it (:class:`LearningRateHalving`,
:class:`BestCheckpoint`, :class:`EpochLog`, ``TensorBoard``) read.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import keras
import numpy as np

from tfnhr.config.choices import DEFAULT_BATCH_PIXELS, HALVE_ON
from tfnhr.data.samples import TextImageSet
from tfnhr.recognition.transcriber import Transcriber
from tfnhr.evaluation.metrics import rates_of_counts, summed_error_counts


class ValidationErrorRates(keras.callbacks.Callback):
    """After every epoch: greedy-decode ``data``'s images and log ``val_cer`` and ``val_wer``
    (ratios) against its texts.

    Args:
      data: the validation images and transcriptions.
      batch_pixels: pixel budget of one model call.
    """

    def __init__(self, data: TextImageSet, batch_pixels: int = DEFAULT_BATCH_PIXELS) -> None:
        super().__init__()
        self.data, self.batch_pixels = data, batch_pixels

    def error_counts(self) -> list[float]:
        """The four error and length totals (:func:`tfnhr.evaluation.metrics.summed_error_counts`) of the
        model's greedy transcriptions of ``data``; a subclass may combine them over workers."""
        hypotheses = Transcriber(self.model, batch_pixels=self.batch_pixels).transcribe(self.data.images)
        return summed_error_counts(self.data.texts, hypotheses)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        cer, wer = rates_of_counts(self.error_counts())
        if logs is not None:
            logs["val_cer"], logs["val_wer"] = cer, wer


def reset_optimizer_state(optimizer: keras.optimizers.Optimizer) -> None:
    """Zero every optimizer slot (Adam's moments) and its step counter; keep the learning rate."""
    keep = {id(optimizer.iterations)}
    learning_rate = getattr(optimizer, "_learning_rate", None)
    if isinstance(learning_rate, keras.Variable):
        keep.add(id(learning_rate))
    for variable in optimizer.variables:
        if id(variable) not in keep:
            variable.assign(np.zeros(variable.shape, variable.dtype))
    optimizer.iterations.assign(0)


class LearningRateHalving(keras.callbacks.Callback):
    """The learning-rate schedule of Wenniger et al. 2019, §VI, made safe for CTC's blank phase:
    when the validation error gets worse than at the best validation so far, halve the learning
    rate, reset the optimizer state and restore the best validation's weights.

    A CTC model starts by emitting noise, then only blanks (validation CER ~100 %: "worse" than
    the noise), and only then learns to read. Halving in that phase restores the noise weights
    with a smaller rate, again and again, and the model never learns. So halving waits:

    * ``start_below``: halving is armed only once the validation CER has fallen below this
      fraction of the first validation's CER (the model reads; 0.5 in ``tfnhr train``).
      ``None``: armed from the start (the paper's rule as written).
    * ``patience``: it halves after this many validations in a row that are worse than the best
      (1: at the first one, as in the paper); a validation that is not worse resets the count.
    * ``margin``: a rate counts as worse only when it exceeds the best validation's by more than
      ``margin`` binomial standard errors of the best's rate over the validation set's reference
      units, ``sqrt(p (1 - p) / n)`` with ``p = (errors + 1) / (n + 2)`` (``n``: the characters
      of ``units`` for the CER, its words for the WER). A small validation set's rate moves by
      that much between two validations of equally good weights (150 digit lines: 0.57 points of
      CER at 3.5 %); a margin keeps such noise from halving, restoring and resetting again and
      again. 0: any increase is worse (the paper's rule). On a large set the margin is small.

    Args:
      halve_on: ``"either"`` (CER or WER worse than the best validation's, the default), ``"both"``
        (both worse), ``"cer"`` or ``"wer"`` alone, ``"never"`` (a constant rate; the best
        validation is still tracked for the checkpoint). The best validation is the one with the
        lowest (CER, WER), compared in that order; one that becomes the new best never halves
        (e.g. a lower CER with a higher WER: training goes on from it).
      min_learning_rate: stop training once a halving would go below this.
      start_below, patience, margin: see above.
      units: ``(characters, words)`` of the validation set's references
        (:func:`tfnhr.evaluation.metrics.reference_sizes`); needed with a margin.

    Validations are epoch ends (with ``fit(steps_per_epoch=N)``, every N updates). Attributes:
    ``best`` (``{"epoch", "val_cer", "val_wer"}`` of the best validation, or ``None``),
    ``halvings`` (epochs at which it halved), ``first_cer``, ``armed``, ``worse_in_a_row``. Its
    state survives a restart through :meth:`state` / ``initial_state`` and ``best_weights`` (the
    best validation's weights).
    """

    def __init__(self, halve_on: str = "either", min_learning_rate: float = 1e-6,
                 initial_state: dict | None = None, best_weights: list[np.ndarray] | None = None,
                 start_below: float | None = None, patience: int = 1, margin: float = 0.0,
                 units: tuple[int, int] | None = None) -> None:
        super().__init__()
        if halve_on not in HALVE_ON:
            raise ValueError(f"halve_on must be one of {HALVE_ON}, got {halve_on!r}")
        if start_below is not None and not 0 < start_below <= 1:
            raise ValueError(f"start_below must be in (0, 1] or None, got {start_below}")
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        if not margin >= 0:
            raise ValueError(f"margin must be >= 0 (standard errors), got {margin}")
        if margin and (units is None or min(units) < 1):
            raise ValueError(f"a margin needs the validation set's characters and words (units), got {units}")
        self.halve_on, self.min_learning_rate = halve_on, min_learning_rate
        self.floor_reached: int | None = None  # the epoch whose halving would have passed the floor
        self.start_below, self.patience, self.margin, self.units = start_below, patience, margin, units
        state = initial_state or {}
        self.best: dict | None = state.get("best")
        self.halvings: list[int] = list(state.get("halvings", []))
        self.first_cer: float | None = state.get("first_cer")
        self.armed: bool = state.get("armed", start_below is None)
        self.worse_in_a_row: int = state.get("worse_in_a_row", 0)
        self.best_weights = best_weights
        if self.best is not None and best_weights is None:
            raise ValueError("resuming LearningRateHalving with a best epoch needs its best_weights")

    def state(self) -> dict:
        """JSON-able state for resuming."""
        return {"best": self.best, "halvings": self.halvings, "first_cer": self.first_cer, "armed": self.armed,
                "worse_in_a_row": self.worse_in_a_row}

    def _worse(self, cer: float, wer: float) -> bool:
        chars, words = self.units or (0, 0)
        cer_worse = cer > self.best["val_cer"] + self._noise(self.best["val_cer"], chars)
        wer_worse = wer > self.best["val_wer"] + self._noise(self.best["val_wer"], words)
        return {"either": cer_worse or wer_worse, "both": cer_worse and wer_worse,
                "cer": cer_worse, "wer": wer_worse, "never": False}[self.halve_on]

    def _noise(self, rate: float, units: int) -> float:
        """``margin`` standard errors of ``rate``, a rate of errors in ``units``."""
        if not self.margin:
            return 0.0
        errors = rate * units
        smoothed = (errors + 1) / (units + 2)
        return self.margin * math.sqrt(smoothed * (1 - smoothed) / units)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = logs if logs is not None else {}
        if "val_cer" not in logs:
            raise RuntimeError("LearningRateHalving needs val_cer/val_wer in the logs: put "
                               "ValidationErrorRates before it in the callback list")
        cer, wer = logs["val_cer"], logs["val_wer"]
        learning_rate = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        logs["learning_rate"] = learning_rate
        if self.first_cer is None:
            self.first_cer = cer
        if not self.armed and cer < self.start_below * self.first_cer:
            self.armed = True
        if self.best is None or (cer, wer) < (self.best["val_cer"], self.best["val_wer"]):
            self.best = {"epoch": epoch + 1, "val_cer": cer, "val_wer": wer}
            self.best_weights = self.model.get_weights()
            self.worse_in_a_row = 0
        elif self.armed and self._worse(cer, wer):
            self.worse_in_a_row += 1
            if self.worse_in_a_row >= self.patience:
                self.worse_in_a_row = 0
                self.halve(epoch)
        else:
            self.worse_in_a_row = 0

    def halve(self, epoch: int) -> None:
        """Halve the learning rate, reset the optimizer, go back to the best weights."""
        optimizer = self.model.optimizer
        new_rate = float(keras.ops.convert_to_numpy(optimizer.learning_rate)) / 2
        if new_rate < self.min_learning_rate:
            self.model.stop_training = True
            self.floor_reached = epoch + 1
            print(f"\nepoch {epoch + 1}: validation error got worse, and halving would take the learning rate "
                  f"below {self.min_learning_rate:g}: training stops", flush=True)
            return
        optimizer.learning_rate = new_rate
        reset_optimizer_state(optimizer)
        self.model.set_weights(self.best_weights)
        self.halvings.append(epoch + 1)
        print(f"\nepoch {epoch + 1}: validation error got worse: learning rate halved to {new_rate:.3g}, "
              f"optimizer state reset, weights of epoch {self.best['epoch']} restored", flush=True)


def save_atomically(model: keras.Model, path: str | Path) -> None:
    """``model.save(path)`` through a temporary file in the same folder and a rename, so a crash
    never leaves a partial file at ``path``."""
    path = Path(path)
    temporary = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        model.save(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


class EpochLog(keras.callbacks.CSVLogger):
    """Keras' ``CSVLogger`` with epochs counted from 1, as the screen and ``summary.json`` count
    them (Keras passes 0-based epoch indices)."""

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        super().on_epoch_end(epoch + 1, logs)


class BestCheckpoint(keras.callbacks.Callback):
    """Save the model to ``path`` (atomically) whenever ``val_cer`` reaches a new minimum;
    ``best_cer`` may carry over from a resumed run."""

    def __init__(self, path: str | Path, best_cer: float = float("inf")) -> None:
        super().__init__()
        self.path, self.best_cer = Path(path), best_cer

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        cer = (logs or {}).get("val_cer")
        if cer is not None and cer < self.best_cer:
            self.best_cer = cer
            save_atomically(self.model, self.path)


class TimeLimit(keras.callbacks.Callback):
    """Stop training after the first epoch that ends more than ``seconds`` after training began."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.stopped_early = False

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.started = time.monotonic()

    def elapsed(self) -> float:
        """Seconds since training began (a distributed run agrees on one value)."""
        return time.monotonic() - self.started

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if time.monotonic() - self.started > self.seconds:
            self.model.stop_training = self.stopped_early = True


class TimeBudgetAnnealing(keras.callbacks.Callback):
    """Lower the learning rate linearly over the end of a time budget: from the fraction
    ``start`` of ``time_limit.seconds`` on, each epoch (validation round) trains with the rate
    times a factor that falls from 1 to ``final`` at the limit (and stays there). Budgeted
    training (Li et al. 2020): a run that has to stop at a fixed time ends better with its rate
    annealed than at a constant one.

    Between epochs the optimizer holds the unannealed rate (restored at each epoch end, before
    :class:`LearningRateHalving` reads or halves it: put this callback before it); the factor of
    each epoch is logged as ``lr_factor``. The clock is ``time_limit.elapsed()``, so a
    distributed run whose time limit agrees on one clock anneals alike on every worker.
    """

    def __init__(self, time_limit: TimeLimit, start: float = 0.5, final: float = 0.05) -> None:
        super().__init__()
        if not 0 <= start < 1 or not 0 < final <= 1:
            raise ValueError(f"need 0 <= start < 1 and 0 < final <= 1, got {start} and {final}")
        self.time_limit, self.start, self.final = time_limit, start, final
        self.rate: float | None = None  # the unannealed rate, during an epoch
        self.factor = 1.0

    def factor_at(self, seconds: float) -> float:
        """The learning-rate factor ``seconds`` into the budget (a budget of 0 s: ``final``)."""
        if self.time_limit.seconds <= 0:
            return self.final
        progress = (seconds / self.time_limit.seconds - self.start) / (1 - self.start)
        return 1.0 - (1.0 - self.final) * min(max(progress, 0.0), 1.0)

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.factor = self.factor_at(self.time_limit.elapsed())
        optimizer = self.model.optimizer
        self.rate = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
        optimizer.learning_rate = self.rate * self.factor

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.rate is not None:
            self.model.optimizer.learning_rate = self.rate
            self.rate = None
        if logs is not None:
            logs["lr_factor"] = self.factor


class ResumeState(keras.callbacks.Callback):
    """After every epoch, save ``last.keras`` (model + optimizer state) and ``state.json``
    (epochs done, the halving callback's state) into ``folder``, both atomically."""

    def __init__(self, folder: str | Path, halving: LearningRateHalving) -> None:
        super().__init__()
        self.folder, self.halving = Path(folder), halving

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        save_atomically(self.model, self.folder / "last.keras")
        temporary = self.folder / f".state.tmp-{os.getpid()}.json"
        temporary.write_text(json.dumps({"epoch": epoch + 1, "halving": self.halving.state()}, indent=1) + "\n")
        os.replace(temporary, self.folder / "state.json")
