"""tf.data input (:mod:`tfnhr.data.dataset`): ragged images and labels keep every value in place;
``make_dataset`` covers every example once per epoch within the pixel budget, reshuffles
deterministically and warns about characters outside the charset."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.images import random_gray as _gray
from tests.helpers.recorded_warnings import caught as _caught
from tfnhr.charset import Charset
from tfnhr.data.batches import balanced_batches, pixel_budget_batches, steps_per_epoch
from tfnhr.data.dataset import make_dataset, to_ragged_images, to_ragged_labels
from tfnhr.data.samples import TextImageSet


# ----------------------------------------------------------------- ragged tensors

def test_ragged_images_keep_every_pixel_in_place():
    rng = np.random.default_rng(0)
    images = [rng.random((h, w, 2), dtype=np.float32) for h, w in [(3, 5), (1, 1), (4, 2)]]
    ragged = to_ragged_images(images)
    assert ragged.shape.rank == 4
    for image, back in zip(images, ragged):
        np.testing.assert_array_equal(back.to_tensor().numpy(), image)
    labels = to_ragged_labels([[1, 2], [3], [4, 5, 6]])
    assert labels.to_list() == [[1, 2], [3], [4, 5, 6]]
    with pytest.raises(ValueError):
        to_ragged_images([np.zeros((0, 3, 1), np.float32)])


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
