"""Tests for the training pieces: pixel-budget batching, CTC feasibility, loading and batching
data, the training callbacks, the metrics' text normalisation, the evaluation helpers and the
charset. References are brute-force searches, NumPy loops or hand-computed values."""

from __future__ import annotations

import itertools
import json
import unicodedata
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.conftest import ragged_stack
from tests.test_recognizer_model import tiny_recognizer
from tfnhr.training.callbacks import (BestCheckpoint, LearningRateHalving, ResumeState, TimeLimit,
                             ValidationErrorRates, reset_optimizer_state, save_atomically)
from tfnhr.charset import UNKNOWN, Charset
from tfnhr.data.samples import TextImageSet, ctc_frames_needed, drop_infeasible, load_set
from tfnhr.data.batches import balanced_batches, pixel_budget_batches, steps_per_epoch
from tfnhr.data.dataset import make_dataset
from tfnhr.data.samples import Sample
from tfnhr.decoding import GreedyDecoder, greedy_decode_batch
from tfnhr.evaluation import EvaluationRow, evaluate, format_table
from tfnhr.inference import Transcriber, confidence
from tfnhr.metrics import error_rate, normalize_text


def _caught(function, *args, **kwargs):
    """``function(*args, **kwargs)`` and the UserWarnings it raised (all of them, even repeats)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    return result, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


# ----------------------------------------------------------------- pixel_budget_batches

def test_pixel_budget_batches_random_against_greedy_properties():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(0, 15))
        pixels = rng.integers(1, 60, size=n)
        budget = int(rng.integers(1, 120))
        order = rng.permutation(n)[:int(rng.integers(0, n + 1))]  # a subset, in shuffled order
        batches = pixel_budget_batches(pixels, budget, order)
        assert [i for batch in batches for i in batch] == order.tolist()  # once each, order kept
        assert all(batch for batch in batches)
        for batch in batches:
            assert sum(pixels[i] for i in batch) <= budget or len(batch) == 1
        # Greedy: a batch is closed only when the next example would not fit into it.
        for batch, following in zip(batches, batches[1:]):
            assert sum(pixels[i] for i in batch) + pixels[following[0]] > budget


def test_pixel_budget_batches_hand_example_and_errors():
    pixels = [4, 7, 3, 12, 2, 2]
    assert pixel_budget_batches(pixels, 10, range(6)) == [[0], [1, 2], [3], [4, 5]]
    assert pixel_budget_batches(pixels, 10, [5, 4, 0, 1]) == [[5, 4, 0], [1]]
    assert pixel_budget_batches(pixels, 1000, [3, 1]) == [[3, 1]]
    assert pixel_budget_batches(pixels, 10, []) == []
    for budget in (0, -5):
        with pytest.raises(ValueError, match="budget"):
            pixel_budget_batches(pixels, budget, range(6))


# ----------------------------------------------------------------- CTC feasibility

def collapse(path) -> tuple[int, ...]:
    """CTC's many-to-one map: merge repeats, then drop blanks (0)."""
    return tuple(c for i, c in enumerate(path) if c != 0 and (i == 0 or c != path[i - 1]))


def test_ctc_frames_needed_matches_brute_force_over_alignments():
    classes, max_frames = 3, 7
    fewest: dict[tuple[int, ...], int] = {}
    for frames in range(max_frames + 1):
        for path in itertools.product(range(classes + 1), repeat=frames):
            fewest.setdefault(collapse(path), frames)
    labels = [label for length in range(5) for label in itertools.product(range(1, classes + 1), repeat=length)]
    checked = 0
    for label in labels:
        if label in fewest:  # reachable within max_frames
            assert ctc_frames_needed(list(label)) == fewest[label], label
            checked += 1
        else:
            assert ctc_frames_needed(list(label)) > max_frames, label
    assert checked > 100
    assert ctc_frames_needed([1, 1, 1, 1]) == 7 and ctc_frames_needed([1, 2, 1, 2]) == 4


# ----------------------------------------------------------------- data loading

def _gray(height, width, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(height, width), dtype=np.uint8)


def test_drop_infeasible_drops_exactly_the_too_narrow():
    charset = Charset("ab")
    # width reduction 4: columns = ceil(W / 4); "aa" needs 3 frames, "ab" 2, "a" 1, "aXa" 3.
    widths_texts = [(12, "aa"), (9, "aa"), (8, "aa"), (5, "ab"), (4, "ab"), (1, "a"), (10, "aXa"), (8, "aXa")]
    data = TextImageSet([_gray(3, w) for w, _ in widths_texts], [t for _, t in widths_texts],
                        [f"id{i}" for i in range(len(widths_texts))])
    kept, messages = _caught(drop_infeasible, data, charset, 4)
    assert kept.ids == ["id0", "id1", "id3", "id5", "id6"]
    assert kept.texts == ["aa", "aa", "ab", "a", "aXa"]
    assert all(a is b for a, b in zip(kept.images, [data.images[i] for i in (0, 1, 3, 5, 6)]))
    assert len(messages) == 1 and "dropped 3 of 8" in messages[0] and "id2" in messages[0]
    assert not charset.unknown_counts  # the encoding of "X" is not counted as data's unknowns

    wide = data.subset([0, 1, 3])
    kept, messages = _caught(drop_infeasible, wide, charset, 4)
    assert kept.ids == ["id0", "id1", "id3"] and messages == []
    with pytest.raises(ValueError, match="too narrow"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        drop_infeasible(data.subset([2, 4]), charset, 4)


def test_load_set_skips_bad_samples_with_one_counted_warning(tmp_path):
    good1, good2 = _gray(10, 25, seed=1), _gray(7, 30, seed=2)
    Image.fromarray(good1).save(tmp_path / "good1.png")
    Image.fromarray(good2).convert("RGB").save(tmp_path / "good2.png")
    (tmp_path / "garbage.png").write_bytes(b"this is not a png")
    samples = [Sample("g1", "ab", str(tmp_path / "good1.png")),
               Sample("bad", "cd", str(tmp_path / "garbage.png")),
               Sample("missing", "ef", str(tmp_path / "missing.png")),
               Sample("empty", "  \t", str(tmp_path / "good1.png")),
               Sample("g2", "a b", str(tmp_path / "good2.png"))]
    data, messages = _caught(load_set, samples, what="unit")
    assert data.ids == ["g1", "g2"] and data.texts == ["ab", "a b"]
    np.testing.assert_array_equal(data.images[0], good1)
    np.testing.assert_array_equal(data.images[1], good2)  # RGB of equal channels -> same gray
    assert data.images[0].dtype == np.uint8
    np.testing.assert_array_equal(data.pixels(), [250, 210])
    assert len(messages) == 1
    assert "unit: skipped 3 of 5" in messages[0]
    assert "2 unreadable" in messages[0] and "1 empty" in messages[0]
    assert "garbage.png" in messages[0] and "missing.png" in messages[0] and "'empty'" in messages[0]

    with pytest.raises(ValueError, match="no usable"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        load_set(samples[1:4])


def test_load_set_height_scaling_keeps_aspect_ratio(tmp_path):
    flat = np.full((10, 25), 77, np.uint8)
    Image.fromarray(flat).save(tmp_path / "flat.png")
    Image.fromarray(_gray(7, 30)).save(tmp_path / "noise.png")
    Image.fromarray(_gray(20, 3, seed=4)).save(tmp_path / "tall.png")
    samples = [Sample("flat", "a", str(tmp_path / "flat.png")), Sample("noise", "b", str(tmp_path / "noise.png")),
               Sample("tall", "c", str(tmp_path / "tall.png"))]
    data, messages = _caught(load_set, samples, height=20)
    assert messages == []
    # round(25 * 20 / 10) = 50, round(30 * 20 / 7) = round(85.71) = 86, already 20 high: unchanged.
    assert [image.shape for image in data.images] == [(20, 50), (20, 86), (20, 3)]
    assert np.all(data.images[0] == 77)
    np.testing.assert_array_equal(data.images[2], _gray(20, 3, seed=4))
    small = load_set(samples[:1], height=1).images[0]
    assert small.shape == (1, 2)  # round(2.5) = 2 (banker's rounding), at least 1 column


# ----------------------------------------------------------------- make_dataset

CHARS = Charset("abc ")


def _indexed_set(n=14, seed=0):
    """Images whose top-left gray value is their index (to recover the order of a batch)."""
    rng = np.random.default_rng(seed)
    images, texts = [], []
    for i in range(n):
        image = rng.integers(0, 256, size=(int(rng.integers(2, 9)), int(rng.integers(2, 15))), dtype=np.uint8)
        image[0, 0] = i
        images.append(image)
        texts.append("".join(rng.choice(list("abc "), size=int(rng.integers(1, 6)))))
    return TextImageSet(images, texts, [f"x{i}" for i in range(n)])


def _batch_indices(images, labels, data, budget):
    """The example indices of one batch, after checking it against the data and the budget."""
    assert isinstance(images, tf.RaggedTensor) and images.dtype == tf.float32
    assert images.shape.rank == 4 and images.shape[-1] == 1 and labels.dtype == tf.int32
    heights, widths = images.row_lengths().numpy(), images.values.row_lengths().numpy()
    flat = images.flat_values.numpy()[:, 0]
    starts = np.cumsum([0] + [int(widths[r:r + h].sum()) for r, h in zip(np.cumsum([0, *heights]), heights)])
    indices = []
    for number, label in enumerate(labels.to_list()):
        ink = flat[starts[number]:starts[number + 1]]
        index = int(round((1.0 - float(ink[0])) * 255))
        gray = data.images[index]
        assert gray.shape[0] == heights[number]
        np.testing.assert_allclose(ink, 1.0 - gray.reshape(-1).astype(np.float64) / 255.0, rtol=0, atol=1e-6)
        assert CHARS.decode(label) == data.texts[index]
        indices.append(index)
    assert sum(data.images[i].size for i in indices) <= budget or len(indices) == 1
    return indices


def _epochs(dataset, data, budget, epochs=2):
    """The example order of each of ``epochs`` passes over ``dataset``."""
    return [[i for images, labels in dataset for i in _batch_indices(images, labels, data, budget)]
            for _ in range(epochs)]


def test_balanced_batches_fixed_count_within_budget_and_nearly_equal():
    rng = np.random.default_rng(7)
    for _ in range(300):
        pixels = rng.integers(1, 50, size=int(rng.integers(1, 40)))
        budget = int(2 * pixels.max() + rng.integers(0, 200))
        order = [int(i) for i in rng.permutation(len(pixels))]
        batches = balanced_batches(pixels, budget, order)
        assert len(batches) == steps_per_epoch(pixels, budget) == min(
            -(-int(pixels.sum()) // (budget - int(pixels.max()))), len(pixels))
        assert [i for batch in batches for i in batch] == order  # consecutive, every index once
        sums = [int(pixels[batch].sum()) for batch in batches]
        assert all(batch for batch in batches) and max(sums) <= budget
        assert max(sums) - min(sums) <= 2 * pixels.max()  # nearly equal: within two examples
    with pytest.raises(ValueError, match="must hold two of the largest"):
        balanced_batches([10, 30], 59, [0, 1])


def test_make_dataset_batches_cover_every_example_within_budget():
    data = _indexed_set()
    budget = 2 * int(data.pixels().max()) + 30
    first, second = _epochs(make_dataset(data, CHARS, budget, shuffle=True, seed=3), data, budget)
    assert sorted(first) == list(range(len(data))) and sorted(second) == list(range(len(data)))
    assert first != second  # reshuffled every epoch
    again = _epochs(make_dataset(data, CHARS, budget, shuffle=True, seed=3), data, budget)
    assert again == [first, second]  # deterministic from (seed, epoch)
    other_seed = _epochs(make_dataset(data, CHARS, budget, shuffle=True, seed=4), data, budget, epochs=1)
    assert other_seed[0] != first
    plain = _epochs(make_dataset(data, CHARS, budget, shuffle=False), data, budget, epochs=1)
    assert plain == [list(range(len(data)))]
    # Training batches: the balanced split of the epoch's order, as many every epoch.
    shuffled = make_dataset(data, CHARS, budget, shuffle=True, seed=3)
    assert int(shuffled.cardinality()) == steps_per_epoch(data.pixels(), budget)
    order = np.random.default_rng([3, 0]).permutation(len(data))
    assert [int(images.nrows()) for images, _ in shuffled] == [
        len(b) for b in balanced_batches(data.pixels(), budget, order)]
    # Evaluation batches: the greedy pixel-budget split of the data's order.
    dataset = make_dataset(data, CHARS, budget, shuffle=False)
    assert [int(images.nrows()) for images, _ in dataset] == [
        len(b) for b in pixel_budget_batches(data.pixels(), budget, range(len(data)))]


def test_make_dataset_warns_about_unknown_characters():
    data = TextImageSet([_gray(3, 4), _gray(3, 5)], ["ab", "xyx"], ["p", "q"])
    charset = Charset("ab")
    dataset, messages = _caught(make_dataset, data, charset, 100, shuffle=False)
    assert len(messages) == 1 and "3 characters" in messages[0] and "'x'×2" in messages[0]
    assert not charset.unknown_counts
    (_, labels), = list(dataset)
    assert labels.to_list() == [[1, 2], [3, 3, 3]]


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
    assert state == {"best": {"epoch": 1, "val_cer": 0.4, "val_wer": 0.7}, "halvings": [2]}

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
        "epoch": 5, "halving": {"best": {"epoch": 2, "val_cer": 0.1, "val_wer": 0.2}, "halvings": [3]}}
    loaded = keras.models.load_model(tmp_path / "last.keras")
    _assert_weights_equal(loaded.get_weights(), model.get_weights())
    assert int(loaded.optimizer.iterations) == 5
    for a, b in zip(_slots(loaded.optimizer), _slots(model.optimizer)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


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


# ----------------------------------------------------------------- metrics

def test_normalize_text_nfc_and_whitespace():
    assert normalize_text("  a\t b\n\n c  ") == "a b c"
    assert normalize_text("cafe\u0301") == "caf\u00e9" == unicodedata.normalize("NFC", "cafe\u0301")
    assert normalize_text("\u00a0x\u2003y\u3000") == "x y"  # Unicode spaces too
    assert normalize_text("") == "" and normalize_text(" \n ") == ""
    assert normalize_text("Ab,c") == "Ab,c"  # case and punctuation kept


def test_error_rates_with_whitespace_and_normal_forms():
    nfc, nfd = "na\u00efve", "nai\u0308ve"
    assert len(nfc) == 5 and len(nfd) == 6
    assert error_rate([nfc], [nfd]) == 0.0 and error_rate([nfd], [nfc], "word") == 0.0
    assert error_rate([nfd], ["naive"]) == pytest.approx(1 / 5)  # one substitution of 5 characters
    assert error_rate(["  the   cat "], ["the cat"]) == 0.0
    assert error_rate(["the cat"], ["the\tcat\n"], "word") == 0.0
    # "ab  cd" -> "ab cd" (5 characters, 2 words); "abcd": 1 deletion, 1 substitution + 1 deletion
    assert error_rate(["ab  cd"], ["abcd"]) == pytest.approx(1 / 5)
    assert error_rate(["ab  cd"], ["abcd"], "word") == pytest.approx(2 / 2)
    # Two lines: 1 + 0 character edits over 3 + 4 characters; words 1 + 0 over 1 + 2.
    assert error_rate(["abc", "x  yz"], ["abd", "x yz"]) == pytest.approx(1 / 7)
    assert error_rate(["abc", "x  yz"], ["abd", "x yz"], "word") == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="unit"):
        error_rate(["a"], ["a"], "line")
    with pytest.raises(ValueError, match="no characters"):
        error_rate([" \t "], ["a"])


# ----------------------------------------------------------------- evaluation

def test_confidence_is_geometric_mean_of_best_column_probabilities():
    rng = np.random.default_rng(5)
    for columns in (1, 3, 9):
        scores = rng.normal(scale=2.0, size=(columns, 6))
        probabilities = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
        expected = np.prod(probabilities.max(axis=1)) ** (1.0 / columns)
        assert confidence(scores) == pytest.approx(expected, rel=1e-9)
        assert confidence(scores.astype(np.float32)) == pytest.approx(expected, rel=1e-5)
    assert confidence(np.zeros((4, 5))) == pytest.approx(1 / 5)
    assert confidence(np.array([[0.0, 1000.0]])) == pytest.approx(1.0)
    assert confidence(np.zeros((0, 5))) == 1.0


def test_evaluate_with_two_decoders_and_format_table():
    charset = Charset("ab ")
    # Columns as one-hot-ish logits of class sequences (1 = a, 2 = b, 3 = " ", 0 = blank).
    def logits(classes):
        return np.eye(charset.num_classes)[classes] * 10.0

    scores = [logits([1, 1, 0, 2]), logits([2, 3, 1]), logits([0, 0])]
    references = ["ab", "b a", "a"]
    class Silent:
        def decode_batch(self, scores_list):
            return [""] * len(scores_list)

    decoders = {"greedy": GreedyDecoder(charset), "silent": Silent()}
    rows, transcriptions = evaluate(scores, references, decoders)
    assert transcriptions == {"greedy": ["ab", "b a", ""], "silent": ["", "", ""]}
    assert [row.decoder for row in rows] == ["greedy", "silent"]
    assert rows[0].cer == pytest.approx(1 / 6) and rows[0].wer == pytest.approx(1 / 4)
    assert rows[1].cer == pytest.approx(1.0) and rows[1].wer == pytest.approx(1.0)
    assert all(row.seconds >= 0 for row in rows)

    table = format_table([EvaluationRow("greedy", 1 / 6, 0.25, 0.04),
                          EvaluationRow("beam+lm", 0.0123, 1.5, 12.345)])
    assert table.splitlines() == [
        "decoder      CER      WER   seconds",
        "greedy    16.67%   25.00%       0.0",
        "beam+lm    1.23%  150.00%      12.3",
    ]


# ----------------------------------------------------------------- charset

def test_charset_round_trips(tmp_path):
    for charset in (Charset("éa b\u00df"), Charset("xy", with_unknown=False)):
        charset.save(tmp_path / "charset.json")
        loaded = Charset.load(tmp_path / "charset.json")
        assert loaded == charset and loaded.with_unknown == charset.with_unknown
        assert loaded.chars == charset.chars
        assert Charset.from_config(json.loads(json.dumps(charset.to_config()))) == charset
    assert json.loads((tmp_path / "charset.json").read_text(encoding="utf-8")) == {"chars": "xy",
                                                                                  "with_unknown": False}
    moved = Charset(["a", UNKNOWN, "b"], with_unknown=False)  # the unknown symbol forces the class
    assert moved.chars == ["a", "b", UNKNOWN] and moved.with_unknown
    assert moved.to_config() == {"chars": "ab", "with_unknown": True}
    assert Charset.from_config(moved.to_config()) == moved
    assert Charset.from_texts(["ba", "c a"]).chars == [" ", "a", "b", "c", UNKNOWN]


def test_charset_encode_unknown_and_warn():
    charset = Charset("abc")
    assert charset.num_classes == 5 and len(charset) == 4
    assert charset.encode("cab") == [3, 1, 2]
    assert charset.encode("axbyx") == [1, 4, 2, 4, 4]
    assert charset.unknown_counts == {"x": 2, "y": 1}
    with pytest.warns(UserWarning, match=r"3 characters of the test set.*'x'×2.*'y'×1"):
        charset.warn_unknown("the test set")
    assert not charset.unknown_counts
    _, messages = _caught(charset.warn_unknown)
    assert messages == []  # nothing left to report

    strict = Charset("abc", with_unknown=False)
    assert strict.num_classes == 4
    with pytest.raises(ValueError, match="'x'"):
        strict.encode("ax")


def test_charset_decode_and_construction_errors():
    charset = Charset("abc")  # classes: 1 a, 2 b, 3 c, 4 unknown
    assert charset.decode([0, 1, 0, 0, 2, 2, 3, 4, 0]) == "abbc" + UNKNOWN  # blanks only, no collapsing
    assert charset.decode(np.array([3, 0, 1], np.int64)) == "ca"
    for bad in ([5], [-1], [1, 7]):
        with pytest.raises(ValueError, match="outside"):
            charset.decode(bad)
    with pytest.raises(ValueError, match="outside"):
        Charset("abc", with_unknown=False).decode([4])
    with pytest.raises(ValueError, match="repeated"):
        Charset("abca")
    with pytest.raises(ValueError, match="single characters"):
        Charset(["a", "bc"])
    with pytest.raises(ValueError, match="at least one"):
        Charset("")
    assert charset.labels_for_decoder() == ["", "a", "b", "c", UNKNOWN]
