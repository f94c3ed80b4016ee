"""The training callbacks (:mod:`tfnhr.training.callbacks`) on a one-layer Dense model with real
Adam steps: optimizer-state reset, learning-rate halving and its rules, atomic saving, the best
checkpoint, resume state, the time limit; and the validation error rates on a tiny recognizer
against greedy transcriptions (and :class:`tfnhr.recognition.transcriber.Transcriber`'s scores)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.helpers.ragged import ragged_stack
from tests.helpers.tiny_models import tiny_recognizer
from tfnhr.data.samples import TextImageSet
from tfnhr.decoding import greedy_decode_batch
from tfnhr.recognition.transcriber import Transcriber
from tfnhr.evaluation.metrics import error_rate
from tfnhr.training.callbacks import (BestCheckpoint, LearningRateHalving, ResumeState, TimeBudgetAnnealing,
                                      TimeLimit, ValidationErrorRates, reset_optimizer_state, save_atomically)


# ----------------------------------------------------------------- callbacks on a Dense model

def _dense_model(learning_rate=0.01, steps=3):
    """A compiled one-layer model after ``steps`` real Adam steps (non-zero moments)."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss="mse")
    _train(model, steps)
    return model


def _train(model, steps):
    rng = np.random.default_rng(steps)
    x, y = rng.normal(size=(8, 3)).astype(np.float32), rng.normal(size=(8, 2)).astype(np.float32)
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        model.optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)


def _slots(optimizer):
    """Adam's moment and velocity variables."""
    slots = [v for v in optimizer.variables if "momentum" in v.path or "velocity" in v.path]
    assert len(slots) == 4  # kernel and bias, two moments each
    return slots


def _learning_rate(model):
    return float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))


def _perturb(model, amount=1.0):
    model.set_weights([w + amount for w in model.get_weights()])


def _assert_weights_equal(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_array_equal(a, e)


def test_reset_optimizer_state_keeps_learning_rate():
    model = _dense_model(0.01, steps=4)
    optimizer = model.optimizer
    assert int(optimizer.iterations) == 4
    assert all(np.any(np.asarray(v) != 0) for v in _slots(optimizer))
    reset_optimizer_state(optimizer)
    assert int(optimizer.iterations) == 0
    assert all(not np.any(np.asarray(v)) for v in _slots(optimizer))
    assert _learning_rate(model) == pytest.approx(0.01)


def test_learning_rate_halving_restores_the_best_epoch():
    model = _dense_model(0.01)
    halving = LearningRateHalving()
    halving.set_model(model)
    logs = {"val_cer": 0.5, "val_wer": 0.8}
    halving.on_epoch_end(0, logs)
    assert logs["learning_rate"] == pytest.approx(0.01)
    assert halving.best == {"epoch": 1, "val_cer": 0.5, "val_wer": 0.8}

    _train(model, 2)
    best_weights = model.get_weights()
    halving.on_epoch_end(1, {"val_cer": 0.4, "val_wer": 0.7})
    assert halving.best == {"epoch": 2, "val_cer": 0.4, "val_wer": 0.7}
    assert halving.halvings == [] and _learning_rate(model) == pytest.approx(0.01)
    _assert_weights_equal(halving.best_weights, best_weights)

    _train(model, 2)
    _perturb(model)
    assert int(model.optimizer.iterations) == 7
    assert all(np.any(np.asarray(v) != 0) for v in _slots(model.optimizer))
    logs = {"val_cer": 0.45, "val_wer": 0.7}
    halving.on_epoch_end(2, logs)
    assert logs["learning_rate"] == pytest.approx(0.01)  # the rate the epoch ran with
    assert _learning_rate(model) == pytest.approx(0.005)
    assert halving.halvings == [3]
    assert halving.best == {"epoch": 2, "val_cer": 0.4, "val_wer": 0.7}
    _assert_weights_equal(model.get_weights(), best_weights)
    assert int(model.optimizer.iterations) == 0
    assert all(not np.any(np.asarray(v)) for v in _slots(model.optimizer))
    assert not model.stop_training

    # A second worse epoch halves again, from the halved rate.
    _perturb(model)
    halving.on_epoch_end(3, {"val_cer": 0.4, "val_wer": 0.9})
    assert _learning_rate(model) == pytest.approx(0.0025) and halving.halvings == [3, 4]
    _assert_weights_equal(model.get_weights(), best_weights)


# best epoch (0.4, 0.7); then (cer, wer) -> whether each halve_on rule halves
HALVE_ON_CASES = [
    ((0.5, 0.6), {"either": True, "both": False, "cer": True, "wer": False}),   # CER worse only
    ((0.3, 0.8), {"either": False, "both": False, "cer": False, "wer": False}),  # WER worse, CER best: new best
    ((0.4, 0.8), {"either": True, "both": False, "cer": False, "wer": True}),   # WER worse only
    ((0.5, 0.8), {"either": True, "both": True, "cer": True, "wer": True}),     # both worse
    ((0.4, 0.7), {"either": False, "both": False, "cer": False, "wer": False}),  # equal
    ((0.3, 0.6), {"either": False, "both": False, "cer": False, "wer": False}),  # both better
]


@pytest.mark.parametrize("halve_on", ["either", "both", "cer", "wer"])
def test_learning_rate_halving_rules(halve_on):
    model = _dense_model(0.01)
    for (cer, wer), halves in HALVE_ON_CASES:
        model.optimizer.learning_rate = 0.01
        halving = LearningRateHalving(halve_on)
        halving.set_model(model)
        halving.on_epoch_end(0, {"val_cer": 0.4, "val_wer": 0.7})
        best_weights = model.get_weights()
        _perturb(model)
        epoch_weights = model.get_weights()
        halving.on_epoch_end(1, {"val_cer": cer, "val_wer": wer})
        assert _learning_rate(model) == pytest.approx(0.005 if halves[halve_on] else 0.01), (cer, wer)
        assert halving.halvings == ([2] if halves[halve_on] else [])
        # The best epoch is the lowest (CER, WER) in that order, whatever the rule.
        new_best = (cer, wer) < (0.4, 0.7)
        assert halving.best["epoch"] == (2 if new_best else 1)
        if halves[halve_on]:  # back to the best epoch's weights (a new best never halves)
            assert not new_best
            _assert_weights_equal(model.get_weights(), best_weights)
        else:
            _assert_weights_equal(model.get_weights(), epoch_weights)


def test_learning_rate_halving_errors_and_minimum():
    with pytest.raises(ValueError, match="halve_on"):
        LearningRateHalving("sometimes")
    model = _dense_model(0.01)
    halving = LearningRateHalving()
    halving.set_model(model)
    with pytest.raises(RuntimeError, match="val_cer"):
        halving.on_epoch_end(0, {"loss": 1.0})
    with pytest.raises(RuntimeError, match="val_cer"):
        halving.on_epoch_end(0, None)

    stopping = LearningRateHalving(min_learning_rate=0.006)
    stopping.set_model(model)
    stopping.on_epoch_end(0, {"val_cer": 0.2, "val_wer": 0.3})
    assert not model.stop_training
    _perturb(model)
    perturbed = model.get_weights()
    stopping.on_epoch_end(1, {"val_cer": 0.3, "val_wer": 0.3})  # 0.005 would be below 0.006
    assert model.stop_training
    assert _learning_rate(model) == pytest.approx(0.01) and stopping.halvings == []
    assert stopping.floor_reached == 2  # the reason training stopped, for the summary
    _assert_weights_equal(model.get_weights(), perturbed)


def test_learning_rate_halving_state_round_trip():
    model = _dense_model(0.01)
    halving = LearningRateHalving("cer")
    halving.set_model(model)
    halving.on_epoch_end(0, {"val_cer": 0.4, "val_wer": 0.7})
    best_weights = model.get_weights()
    _perturb(model)
    halving.on_epoch_end(1, {"val_cer": 0.6, "val_wer": 0.5})
    state = json.loads(json.dumps(halving.state()))
    assert state == {"best": {"epoch": 1, "val_cer": 0.4, "val_wer": 0.7}, "halvings": [2], "first_cer": 0.4,
                     "armed": True, "worse_in_a_row": 0}

    with pytest.raises(ValueError, match="best_weights"):
        LearningRateHalving("cer", initial_state=state)
    assert LearningRateHalving(initial_state={"best": None, "halvings": []}).best is None

    resumed = LearningRateHalving("cer", initial_state=state, best_weights=best_weights)
    assert resumed.state() == state
    resumed.set_model(model)
    _perturb(model, 2.0)
    resumed.on_epoch_end(2, {"val_cer": 0.5, "val_wer": 0.1})
    assert resumed.halvings == [2, 3] and _learning_rate(model) == pytest.approx(0.0025)
    _assert_weights_equal(model.get_weights(), best_weights)


# The validation CERs of the run on real handwritten digits: noise (88 %), CTC's blank phase
# (~100 %), then reading; later two worse validations in a row and a new best.
BLANK_PHASE_RUN = [0.88, 0.995, 0.99, 0.96, 0.67, 0.27, 0.13, 0.066, 0.07, 0.08, 0.05]


def _run_halving(halving, model, cers):
    """Feed ``cers`` (WER = min(1, 2 CER)) as validations, perturbing the weights in between;
    returns the weights seen at each validation."""
    halving.set_model(model)
    seen = []
    for epoch, cer in enumerate(cers):
        _perturb(model, 0.1)
        seen.append(model.get_weights())
        halving.on_epoch_end(epoch, {"val_cer": cer, "val_wer": min(1.0, 2 * cer)})
    return seen


def test_the_papers_rule_halves_through_the_blank_phase():
    model = _dense_model(0.005)
    halving = LearningRateHalving()
    seen = _run_halving(halving, model, BLANK_PHASE_RUN[:4])
    # Every validation of the blank phase is worse than the noise of the first: each halves and
    # goes back to the first validation's weights (in a real run, the model never gets further).
    assert halving.halvings == [2, 3, 4] and halving.best["epoch"] == 1
    _assert_weights_equal(model.get_weights(), seen[0])
    _run_halving(halving, model, BLANK_PHASE_RUN[4:])  # (validations numbered from 1 again)
    assert halving.halvings == [2, 3, 4, 5, 6]
    assert _learning_rate(model) == pytest.approx(0.005 / 2**5)


def test_halving_waits_until_the_model_reads_then_for_patience():
    model = _dense_model(0.005)
    halving = LearningRateHalving(start_below=0.5, patience=2)
    seen = _run_halving(halving, model, BLANK_PHASE_RUN)
    assert halving.first_cer == 0.88 and halving.armed
    # Armed at validation 6 (0.27 < 0.44); validations 9 and 10 are worse than 8's 0.066: one
    # halving, at the second of them, back to validation 8's weights.
    assert halving.halvings == [10]
    assert _learning_rate(model) == pytest.approx(0.0025)
    assert halving.best == {"epoch": 11, "val_cer": 0.05, "val_wer": 0.1}
    _assert_weights_equal(halving.best_weights, seen[10])

    # Not armed yet: no halving however long the blank phase lasts.
    waiting = LearningRateHalving(start_below=0.5, patience=1)
    _run_halving(waiting, _dense_model(0.005), [0.88] + [1.0] * 10 + [0.5])
    assert not waiting.armed and waiting.halvings == []


def test_patience_counts_worse_validations_in_a_row():
    model = _dense_model(0.01)
    halving = LearningRateHalving(patience=3)
    # best 0.3; worse, worse, new best (count reset), worse, worse, worse -> one halving at 7
    _run_halving(halving, model, [0.4, 0.3, 0.35, 0.32, 0.2, 0.25, 0.3, 0.21])
    assert halving.halvings == [8]
    with pytest.raises(ValueError, match="patience"):
        LearningRateHalving(patience=0)
    with pytest.raises(ValueError, match="start_below"):
        LearningRateHalving(start_below=1.5)


def _binomial_standard_error(errors, units):
    """Closed form: the standard error of a rate of ``errors`` in ``units``, smoothed by one
    pseudo error and one pseudo success."""
    p = (errors + 1) / (units + 2)
    return math.sqrt(p * (1 - p) / units)


def test_a_margin_of_standard_errors_keeps_noise_from_halving():
    model = _dense_model(0.01)
    halving = LearningRateHalving(margin=1.0, units=(1000, 200))
    halving.set_model(model)
    halving.on_epoch_end(0, {"val_cer": 0.035, "val_wer": 0.12})  # 35 of 1000, 24 of 200
    cer_margin, wer_margin = _binomial_standard_error(35, 1000), _binomial_standard_error(24, 200)
    assert 0.005 < cer_margin < 0.006 and 0.02 < wer_margin < 0.025
    for cer, wer, worse in [(0.035 + cer_margin - 1e-4, 0.12, False), (0.035 + cer_margin + 1e-4, 0.12, True),
                            (0.036, 0.12 + wer_margin - 1e-4, False), (0.036, 0.12 + wer_margin + 1e-4, True)]:
        before = len(halving.halvings)
        halving.on_epoch_end(1, {"val_cer": cer, "val_wer": wer})
        assert len(halving.halvings) == before + worse, (cer, wer)
    # Twice the margin needs twice the excess.
    twice = LearningRateHalving(margin=2.0, units=(1000, 200))
    twice.set_model(model)
    twice.on_epoch_end(0, {"val_cer": 0.035, "val_wer": 0.12})
    twice.on_epoch_end(1, {"val_cer": 0.035 + 1.9 * cer_margin, "val_wer": 0.12})
    assert twice.halvings == []
    twice.on_epoch_end(2, {"val_cer": 0.035 + 2.1 * cer_margin, "val_wer": 0.12})
    assert twice.halvings == [3]


def test_a_validation_within_the_margin_breaks_a_run_of_worse_ones():
    model = _dense_model(0.01)
    halving = LearningRateHalving(margin=1.0, patience=2, units=(1000, 200))
    halving.set_model(model)
    # best 0.03; worse, within the margin (not worse: the count restarts), worse, worse -> halves at 5
    for epoch, cer in enumerate([0.03, 0.05, 0.031, 0.05, 0.05]):
        halving.on_epoch_end(epoch, {"val_cer": cer, "val_wer": 0.1})
    assert halving.halvings == [5]
    with pytest.raises(ValueError, match="margin"):
        LearningRateHalving(margin=-1.0)
    for units in (None, (1000, 0)):
        with pytest.raises(ValueError, match="units"):
            LearningRateHalving(margin=1.0, units=units)


def test_a_resumed_halving_keeps_its_arming_and_count():
    model = _dense_model(0.01)
    halving = LearningRateHalving(start_below=0.5, patience=2)
    _run_halving(halving, model, [0.9, 0.3, 0.35])
    state = json.loads(json.dumps(halving.state()))
    assert state["armed"] and state["worse_in_a_row"] == 1 and state["first_cer"] == 0.9
    resumed = LearningRateHalving(start_below=0.5, patience=2, initial_state=state,
                                  best_weights=halving.best_weights)
    resumed.set_model(model)
    resumed.on_epoch_end(3, {"val_cer": 0.4, "val_wer": 0.8})
    assert resumed.halvings == [4]


def test_save_atomically_leaves_no_partial_file(tmp_path):
    model = _dense_model()
    path = tmp_path / "model.keras"
    save_atomically(model, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.keras"]
    _assert_weights_equal(keras.models.load_model(path).get_weights(), model.get_weights())
    before = path.read_bytes()

    def crash(target):
        Path(target).write_bytes(b"half a model")
        raise OSError("disk full")

    model.save = crash
    with pytest.raises(OSError, match="disk full"):
        save_atomically(model, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.keras"]
    assert path.read_bytes() == before


def test_best_checkpoint_saves_only_on_improvement(tmp_path):
    model = _dense_model()
    path = tmp_path / "best.keras"
    checkpoint = BestCheckpoint(path)
    checkpoint.set_model(model)
    checkpoint.on_epoch_end(0, {"loss": 1.0})
    assert not path.exists()
    checkpoint.on_epoch_end(0, {"val_cer": 0.5})
    first = model.get_weights()
    _assert_weights_equal(keras.models.load_model(path).get_weights(), first)
    _perturb(model)
    for cer in (0.5, 0.7):  # not better: the file keeps epoch 1's model
        checkpoint.on_epoch_end(1, {"val_cer": cer})
    _assert_weights_equal(keras.models.load_model(path).get_weights(), first)
    checkpoint.on_epoch_end(2, {"val_cer": 0.4})
    assert checkpoint.best_cer == 0.4
    _assert_weights_equal(keras.models.load_model(path).get_weights(), model.get_weights())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.keras"]

    resumed = BestCheckpoint(tmp_path / "resumed.keras", best_cer=0.3)
    resumed.set_model(model)
    resumed.on_epoch_end(3, {"val_cer": 0.35})
    assert not (tmp_path / "resumed.keras").exists()


def test_resume_state_writes_model_and_state(tmp_path):
    model = _dense_model(steps=5)
    halving = LearningRateHalving(initial_state={"best": {"epoch": 2, "val_cer": 0.1, "val_wer": 0.2},
                                                 "halvings": [3]}, best_weights=model.get_weights())
    resume = ResumeState(tmp_path, halving)
    resume.set_model(model)
    resume.on_epoch_end(4, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.keras", "state.json"]
    assert json.loads((tmp_path / "state.json").read_text()) == {
        "epoch": 5, "halving": {"best": {"epoch": 2, "val_cer": 0.1, "val_wer": 0.2}, "halvings": [3],
                                "first_cer": None, "armed": True, "worse_in_a_row": 0}}
    loaded = keras.models.load_model(tmp_path / "last.keras")
    _assert_weights_equal(loaded.get_weights(), model.get_weights())
    assert int(loaded.optimizer.iterations) == 5
    for a, b in zip(_slots(loaded.optimizer), _slots(model.optimizer)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


class _Clock(TimeLimit):
    """A time limit whose clock the test sets."""

    def __init__(self, seconds):
        super().__init__(seconds)
        self.now = 0.0

    def elapsed(self):
        return self.now


def test_annealing_scales_each_epoch_and_restores_the_rate_for_halving():
    model = _dense_model(0.01)
    clock = _Clock(100.0)
    annealing, halving = TimeBudgetAnnealing(clock, start=0.5, final=0.05), LearningRateHalving()
    for callback in (annealing, halving):
        callback.set_model(model)
    # factor: 1 until half the budget, then linear to 0.05 at the limit, 0.05 after it
    for seconds, factor in ((0, 1.0), (50, 1.0), (75, 0.525), (100, 0.05), (130, 0.05)):
        assert annealing.factor_at(seconds) == pytest.approx(factor)
    clock.now = 75.0
    annealing.on_epoch_begin(0)
    assert _learning_rate(model) == pytest.approx(0.01 * 0.525)  # what the epoch trains with
    logs = {"val_cer": 0.3, "val_wer": 0.5}
    annealing.on_epoch_end(0, logs)  # before the halving, as in train()'s callback list
    halving.on_epoch_end(0, logs)
    assert logs["lr_factor"] == pytest.approx(0.525) and logs["learning_rate"] == pytest.approx(0.01)
    clock.now = 90.0
    annealing.on_epoch_begin(1)
    assert _learning_rate(model) == pytest.approx(0.01 * 0.24)
    annealing.on_epoch_end(1, {})
    _perturb(model)
    halving.on_epoch_end(1, {"val_cer": 0.4, "val_wer": 0.5})  # worse: halves the unannealed rate
    clock.now = 100.0
    annealing.on_epoch_begin(2)
    assert _learning_rate(model) == pytest.approx(0.005 * 0.05)
    with pytest.raises(ValueError, match="start"):
        TimeBudgetAnnealing(clock, start=1.0)
    assert TimeBudgetAnnealing(_Clock(0.0)).factor_at(0.0) == 0.05  # --time-limit 0: one epoch, annealed


def test_time_limit_stops_after_first_epoch():
    model = _dense_model()
    x, y = np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32)
    limit = TimeLimit(seconds=0)
    history = model.fit(x, y, epochs=4, verbose=0, callbacks=[limit])
    assert limit.stopped_early and len(history.epoch) == 1
    unlimited = TimeLimit(seconds=float("inf"))
    history = model.fit(x, y, epochs=3, verbose=0, callbacks=[unlimited])
    assert not unlimited.stopped_early and len(history.epoch) == 3


# ----------------------------------------------------------------- with a tiny recognizer

def _inked(width, rng, height=16):
    """Random ink whose density changes every 8 columns (so the scores vary along the line)."""
    density = np.repeat(rng.random(-(-width // 8)), 8)[:width]
    return np.where(rng.random((height, width)) < density, 0, 255).astype(np.uint8)


def test_validation_error_rates_are_those_of_greedy_transcriptions():
    recognizer = tiny_recognizer()
    charset = recognizer.charset
    rng = np.random.default_rng(1)
    grays = [_inked(w, rng) for w in (20, 35, 64, 17, 40, 90)]
    texts = ["b", "c a", "b  a", "a", " b", "a b"]
    data = TextImageSet(grays, texts, [str(i) for i in range(len(grays))])
    callback = ValidationErrorRates(data, batch_pixels=1000)  # batches [0, 1], [2, 3], [4], [5]
    callback.set_model(recognizer)
    logs = {}
    callback.on_epoch_end(0, logs)

    inputs = [(1.0 - g.astype(np.float32) / 255.0)[..., None] for g in grays]
    scores = recognizer(ragged_stack(inputs))
    hypotheses = greedy_decode_batch([s.numpy() for s in scores], charset)
    assert len(set(hypotheses)) > 1 and any(h.strip() for h in hypotheses)
    assert 0 < error_rate(texts, hypotheses, "char") < 1
    assert logs["val_cer"] == pytest.approx(error_rate(texts, hypotheses, "char"))
    assert logs["val_wer"] == pytest.approx(error_rate(texts, hypotheses, "word"))
    callback.on_epoch_end(1, None)  # no logs: nothing to write into, no error

    # Transcriber.scores: scaled to the model's input height (32 -> 16 rows), in other batches, in order.
    assert recognizer.input_height == 16
    tall = [np.kron(g, np.ones((2, 2), np.uint8)) for g in grays]
    results = Transcriber(recognizer, batch_pixels=5000).scores(tall)
    resized = [np.asarray(Image.fromarray(g).resize((g.shape[1] // 2, 16), Image.BILINEAR)) for g in tall]
    expected = recognizer(ragged_stack([(1.0 - g.astype(np.float32) / 255.0)[..., None] for g in resized]))
    assert len(results) == len(grays)
    for result, reference in zip(results, expected):
        np.testing.assert_allclose(result, reference.numpy(), rtol=1e-5, atol=1e-5)
