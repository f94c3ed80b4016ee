"""From samples on disk to ``tf.data`` batches bounded by a pixel budget.

* :func:`load_set` reads every image once (optionally scaled to a fixed height), keeps it in
  memory as uint8, and skips unreadable images and empty transcriptions, **counting** them in a
  warning (:func:`read_images` yields them one at a time, for streaming). Training data is
  small next to memory: IAM's 6161 lines at 64 px height are ~0.35 GB.
* :func:`balanced_batches` groups a shuffled order into a fixed number of batches whose summed
  pixel counts are nearly equal and within a budget (the seed's batching by size, not by example
  count): big images make small batches, small ones large batches, and the packed canvases stay
  about the same size. :func:`pixel_budget_batches` (greedy, for inference) fills each batch up
  to the budget in the given order.
* :func:`make_dataset` yields ``(images, labels)``: images ragged ``[B, (H), (W), 1]`` float32
  ink in [0, 1], labels ragged ``[B, (L)]`` int32 class indices; reshuffled every epoch
  (deterministically from the seed and the epoch number), with prefetch;
  :func:`batched_dataset` does the same for batches that the caller chooses (a worker's share).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from tfnhr.charset import Charset
from tfnhr.data.batching import to_ragged_images, to_ragged_labels
from tfnhr.data.images import ImageReadError, load_gray, scale_to_height, to_ink
from tfnhr.data.samples import Sample

IMAGES_SPEC = tf.RaggedTensorSpec([None, None, None, 1], tf.float32, ragged_rank=2)
LABELS_SPEC = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)


@dataclasses.dataclass
class TextImageSet:
    """Images in memory: ``images[i]`` uint8 ``[H_i, W_i]`` gray (0 = ink), ``texts[i]`` its
    transcription, ``ids[i]`` its sample id."""

    images: list[np.ndarray]
    texts: list[str]
    ids: list[str]

    def __len__(self) -> int:
        return len(self.images)

    def pixels(self) -> np.ndarray:
        """Pixel count per image, int64 ``[N]``."""
        return np.array([image.size for image in self.images], dtype=np.int64)

    def subset(self, indices: Sequence[int]) -> "TextImageSet":
        """The examples at ``indices``, in that order."""
        return TextImageSet([self.images[i] for i in indices], [self.texts[i] for i in indices],
                            [self.ids[i] for i in indices])


def load_set(samples: Sequence[Sample], height: int | None = None, progress: bool = False,
             what: str = "data") -> TextImageSet:
    """Read ``samples``' images (scaled to ``height`` rows, aspect kept, if given), skipping
    unusable samples as :func:`read_images` does."""
    images, texts, ids = [], [], []
    for sample, gray in read_images(samples, height, progress, what):
        images.append(gray)
        texts.append(sample.text)
        ids.append(sample.id)
    return TextImageSet(images, texts, ids)


def read_images(samples: Sequence[Sample], height: int | None = None, progress: bool = False,
                what: str = "data") -> Iterator[tuple[Sample, np.ndarray]]:
    """``(sample, gray)`` for each usable sample in order, gray uint8 ``[H, W]`` (scaled to
    ``height`` rows, aspect kept, if given), one image in memory at a time.

    Unreadable images and empty transcriptions are skipped and counted in one warning naming
    the first few; ``ValueError`` at the end if nothing was usable.
    """
    import keras

    usable, unreadable, empty = 0, [], []
    bar = keras.utils.Progbar(len(samples), unit_name="image") if progress else None
    for number, sample in enumerate(samples, start=1):
        if not sample.text.strip():
            empty.append(sample.id)
        else:
            try:
                gray = load_gray(sample.image_path)
            except ImageReadError as error:
                unreadable.append(str(error))
            else:
                usable += 1
                yield sample, scale_to_height(gray, height)
        if bar is not None and (number % 200 == 0 or number == len(samples)):
            bar.update(number)
    if unreadable or empty:
        warnings.warn(f"{what}: skipped {len(unreadable) + len(empty)} of {len(samples)} samples: "
                      f"{len(unreadable)} unreadable images {unreadable[:3]}, "
                      f"{len(empty)} empty transcriptions {empty[:3]}", stacklevel=3)
    if not usable:
        raise ValueError(f"{what}: no usable samples (of {len(samples)})")


def ctc_frames_needed(label: Sequence[int]) -> int:
    """The fewest CTC frames that can emit ``label``: its length plus one blank between each
    pair of equal neighbours."""
    return len(label) + sum(1 for a, b in zip(label, label[1:]) if a == b)


def drop_infeasible(data: TextImageSet, charset: Charset, width_reduction: int,
                    what: str = "training data") -> TextImageSet:
    """Drop examples too narrow for CTC to emit their text (``ceil(W / width_reduction)``
    columns < :func:`ctc_frames_needed`), with a counted warning; such examples have infinite
    loss and would turn the gradients into NaN."""
    keep = [i for i, (image, text) in enumerate(zip(data.images, data.texts))
            if -(-image.shape[1] // width_reduction)
            >= ctc_frames_needed(charset.encode(text, count_unknown=False))]  # counted where labels are made
    if len(keep) < len(data):
        dropped = [data.ids[i] for i in sorted(set(range(len(data))) - set(keep))]
        warnings.warn(f"{what}: dropped {len(dropped)} of {len(data)} examples too narrow for their "
                      f"transcription at {width_reduction} input columns per output column "
                      f"(first: {dropped[:3]}); scale images up or use narrower blocks", stacklevel=2)
    if not keep:
        raise ValueError(f"{what}: every example is too narrow for its transcription")
    return data.subset(keep)


def pixel_budget_batches(pixels: Sequence[int], budget: int, order: Sequence[int]) -> list[list[int]]:
    """Split ``order`` (example indices) into consecutive batches of at most ``budget`` pixels.

    An example larger than the budget forms a batch of its own. Every index appears once.
    """
    if budget < 1:
        raise ValueError(f"the pixel budget must be positive, got {budget}")
    batches, current, filled = [], [], 0
    for index in order:
        size = int(pixels[index])
        if current and filled + size > budget:
            batches.append(current)
            current, filled = [], 0
        current.append(int(index))
        filled += size
    if current:
        batches.append(current)
    return batches


def epoch_batch_count(pixels: Sequence[int], budget: int) -> int:
    """How many batches :func:`balanced_batches` makes of examples of these pixel counts: the
    fewest whose share of the total pixels leaves room for one more example under ``budget``
    (and no more than there are examples).

    Raises ``ValueError`` unless the budget holds two of the largest examples."""
    largest, total = int(max(pixels)), int(sum(pixels))
    if budget < 2 * largest:
        raise ValueError(f"the pixel budget {budget} must hold two of the largest example ({largest} "
                         "pixels): raise the budget (--batch-pixels) or scale the images down (--height)")
    return min(-(-total // (budget - largest)), len(pixels))


def balanced_batches(pixels: Sequence[int], budget: int, order: Sequence[int]) -> list[list[int]]:
    """Split ``order`` into exactly :func:`epoch_batch_count` consecutive batches of nearly equal
    pixel sums, each at most ``budget``.

    Batch ``b`` takes the examples whose pixel range starts in ``[b, b + 1) * total / n``: at most
    ``total / n + largest <= budget`` pixels. Only when an example is wider than ``total / n``
    (few, large examples) can an interval hold no start; its neighbours' examples then move over
    so that no batch is empty. With a fixed count, every epoch has the same number of steps
    whatever the shuffle (Keras counts an epoch's steps from the first one and would otherwise
    drop batches or stop early).
    """
    order = np.asarray(order, dtype=np.int64)
    if len(order) != len(pixels):
        raise ValueError(f"the order has {len(order)} indices for {len(pixels)} examples")
    count = epoch_batch_count(pixels, budget)
    sizes = np.asarray(pixels, dtype=np.int64)[order]
    starts = np.cumsum(sizes) - sizes
    owner = np.minimum(starts * count // max(int(sizes.sum()), 1), count - 1)
    # Where an interval holds no start (an example wider than total / n), move the neighbouring
    # examples over so that every batch index occurs: steps of at most 1, from 0 to n - 1.
    for k in range(1, len(owner)):
        owner[k] = min(owner[k], owner[k - 1] + 1)
    owner[-1] = count - 1
    for k in range(len(owner) - 2, -1, -1):
        owner[k] = max(owner[k], owner[k + 1] - 1)
    return [[int(i) for i in order[owner == b]] for b in range(count)]


def ragged_batch(images: Sequence[np.ndarray], labels: Sequence[Sequence[int]]
                 ) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """uint8 ``[H_i, W_i]`` grays + label lists -> (ragged ``[B, (H), (W), 1]`` float32 ink,
    ragged ``[B, (L)]`` int32)."""
    return to_ragged_images([to_ink(image) for image in images]), to_ragged_labels(labels)


def make_dataset(data: TextImageSet, charset: Charset, batch_pixels: int, shuffle: bool = True,
                 seed: int = 0, first_epoch: int = 0) -> tf.data.Dataset:
    """``(images, labels)`` batches of at most ``batch_pixels`` pixels (see the module docstring).

    Each pass over the dataset is one epoch, counted from ``first_epoch`` (a resumed run passes
    the epochs already done). With ``shuffle`` (training) the order of epoch ``e`` is a
    permutation drawn from ``(seed, e)``, split by :func:`balanced_batches` into the same number
    of batches every epoch (the dataset's cardinality; the budget must hold two of the largest
    examples). Without (evaluation) the data's order is split greedily by
    :func:`pixel_budget_batches`, where an example larger than the budget gets a batch alone.
    """
    pixels = data.pixels()

    def epoch_batches(epoch: int) -> list[list[int]]:
        if not shuffle:
            return pixel_budget_batches(pixels, batch_pixels, np.arange(len(data)))
        return balanced_batches(pixels, batch_pixels, np.random.default_rng([seed, epoch]).permutation(len(data)))

    return batched_dataset(data, charset, epoch_batches, first_epoch,
                           steps=epoch_batch_count(pixels, batch_pixels) if shuffle else None)


def batched_dataset(data: TextImageSet, charset: Charset, epoch_batches: Callable[[int], list[list[int]]],
                    first_epoch: int = 0, steps: int | None = None) -> tf.data.Dataset:
    """``(images, labels)`` batches of ``data`` as ``epoch_batches(e)`` (lists of example indices)
    groups them in epoch ``e``; each pass over the dataset is one epoch, counted from
    ``first_epoch``. ``steps``: the batches of every epoch, declared as the cardinality (what
    Keras needs to run every epoch in full); ``None``: unknown.

    :func:`make_dataset` is this with its own batching; a distributed job passes each worker's
    share (``horovod_jobs.train``).
    """
    labels = [charset.encode(text) for text in data.texts]
    charset.warn_unknown("the data set")
    epoch = [first_epoch]

    def batches() -> Iterator[tuple[tf.RaggedTensor, tf.RaggedTensor]]:
        chosen = epoch_batches(epoch[0])
        epoch[0] += 1
        for batch in chosen:
            yield ragged_batch([data.images[i] for i in batch], [labels[i] for i in batch])

    dataset = tf.data.Dataset.from_generator(batches, output_signature=(IMAGES_SPEC, LABELS_SPEC))
    if steps is not None:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(steps))
    return dataset.prefetch(2)
