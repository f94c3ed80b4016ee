"""From text images in memory to ``tf.data`` batches.

:func:`make_dataset` yields ``(images, labels)``: images ragged ``[B, (H), (W), 1]`` float32 ink
in [0, 1], labels ragged ``[B, (L)]`` int32 class indices, in batches bounded by a pixel budget
(:mod:`tfnhr.data.batches`); reshuffled every epoch (deterministically from the seed and the
epoch number), optionally augmented (:mod:`tfnhr.data.augment`: each example distorted anew every
epoch, in :data:`AUGMENT_THREADS` threads that run ahead of training), with prefetch. :func:`batched_dataset` does the same for batches that the caller
chooses (a worker's share). :func:`ragged_batch` makes one such batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tensorflow as tf

from tfnhr.charset import Charset
from tfnhr.data.batches import balanced_batches, pixel_budget_batches, steps_per_epoch
from tfnhr.data.images import to_ink
from tfnhr.data.samples import TextImageSet

Augment = Callable[[np.ndarray, int, int], np.ndarray]
"""``augment(gray, epoch, index) -> gray``: a new uint8 ``[H, W']`` image for example ``index`` in
``epoch`` (e.g. :class:`tfnhr.data.augment.Augmenter`); deterministic and thread-safe."""

AUGMENT_THREADS = 2
"""Threads that augment a batch's images (OpenCV releases the GIL while it works)."""

IMAGES_SPEC = tf.RaggedTensorSpec([None, None, None, 1], tf.float32, ragged_rank=2)
LABELS_SPEC = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)


def to_ragged_images(images: Sequence[np.ndarray]) -> tf.RaggedTensor:
    """``[H_i, W_i, C]`` arrays -> float32 ``tf.RaggedTensor [B, (H), (W), C]``.

    Built from the flat pixels and the row lengths (no per-element Python conversion).
    """
    if not images:
        raise ValueError("no images to batch")
    channels = {image.shape[-1] for image in images}
    if len(channels) != 1 or any(image.ndim != 3 or 0 in image.shape for image in images):
        raise ValueError("images must be non-empty [H, W, C] arrays with one channel count")
    pixels = np.concatenate([image.reshape(-1, image.shape[-1]) for image in images]).astype(np.float32)
    heights = [image.shape[0] for image in images]
    widths = np.repeat([image.shape[1] for image in images], heights)
    return tf.RaggedTensor.from_nested_row_lengths(pixels, [heights, widths])


def to_ragged_labels(labels: Sequence[Sequence[int]]) -> tf.RaggedTensor:
    """Label sequences -> int32 ``tf.RaggedTensor [B, (L)]``."""
    flat = np.array([index for label in labels for index in label], dtype=np.int32)
    return tf.RaggedTensor.from_row_lengths(flat, [len(label) for label in labels])


def ragged_batch(images: Sequence[np.ndarray], labels: Sequence[Sequence[int]]
                 ) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """uint8 ``[H_i, W_i]`` grays + label lists -> (ragged ``[B, (H), (W), 1]`` float32 ink,
    ragged ``[B, (L)]`` int32)."""
    return to_ragged_images([to_ink(image) for image in images]), to_ragged_labels(labels)


def make_dataset(data: TextImageSet, charset: Charset, batch_pixels: int, shuffle: bool = True,
                 seed: int = 0, first_epoch: int = 0, augment: Augment | None = None,
                 sort_window: int = 1) -> tf.data.Dataset:
    """``(images, labels)`` batches of at most ``batch_pixels`` pixels (see the module docstring).

    Each pass over the dataset is one epoch, counted from ``first_epoch`` (a resumed run passes
    the epochs already done). With ``shuffle`` (training) the order of epoch ``e`` is a
    permutation drawn from ``(seed, e)``, split by :func:`~tfnhr.data.batches.balanced_batches` into the same
    number of batches every epoch (the dataset's cardinality; the budget must hold two of the
    largest examples). Without (evaluation) the data's order is split greedily by
    :func:`~tfnhr.data.batches.pixel_budget_batches`, where an example larger than the budget gets a batch alone.
    ``augment``: see :func:`batched_dataset` (batches are formed on the sizes before augmentation).
    ``sort_window``: with ``shuffle``, batches of similar widths from windows of this many
    batches (:func:`~tfnhr.data.batches.similar_width_batches`; ``1``: random batches).
    """
    pixels = data.pixels()
    widths = [image.shape[1] for image in data.images]

    def epoch_batches(epoch: int) -> list[list[int]]:
        if not shuffle:
            return pixel_budget_batches(pixels, batch_pixels, np.arange(len(data)))
        order = np.random.default_rng([seed, epoch]).permutation(len(data))
        return balanced_batches(pixels, batch_pixels, order, widths, sort_window, [seed, epoch, 1])

    return batched_dataset(data, charset, epoch_batches, first_epoch,
                           steps=steps_per_epoch(pixels, batch_pixels) if shuffle else None, augment=augment)


def batched_dataset(data: TextImageSet, charset: Charset, epoch_batches: Callable[[int], list[list[int]]],
                    first_epoch: int = 0, steps: int | None = None, augment: Augment | None = None
                    ) -> tf.data.Dataset:
    """``(images, labels)`` batches of ``data`` as ``epoch_batches(e)`` (lists of example indices)
    groups them in epoch ``e``; each pass over the dataset is one epoch, counted from
    ``first_epoch``. ``steps``: the batches of every epoch, declared as the cardinality (what
    Keras needs to run every epoch in full); ``None``: unknown. ``augment``: applied to every
    image of epoch ``e`` as ``augment(image, e, index)`` (``None``: images as they are).

    :func:`make_dataset` is this with its own batching; a distributed job passes each worker's
    share (``horovod_jobs.train``).
    """
    labels = [charset.encode(text) for text in data.texts]
    charset.warn_unknown("the data set")
    epoch = [first_epoch]

    def batches() -> Iterator[tuple[tf.RaggedTensor, tf.RaggedTensor]]:
        this_epoch = epoch[0]
        chosen = epoch_batches(this_epoch)
        epoch[0] += 1
        with ThreadPoolExecutor(AUGMENT_THREADS) as pool:
            for batch in chosen:
                if augment is None:
                    images = [data.images[i] for i in batch]
                else:
                    images = list(pool.map(lambda i: augment(data.images[i], this_epoch, i), batch))
                yield ragged_batch(images, [labels[i] for i in batch])

    dataset = tf.data.Dataset.from_generator(batches, output_signature=(IMAGES_SPEC, LABELS_SPEC))
    if steps is not None:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(steps))
    return dataset.prefetch(2)
