"""Text images as records and in memory, free of TensorFlow.

* :class:`Sample`: one image file and its transcription (what every data source yields).
* :class:`TextImageSet`: images in memory as uint8 gray arrays, with their texts and ids.
* :func:`load_set` reads every image once (optionally scaled to a fixed height) and skips
  unreadable images and empty transcriptions, **counting** them in a warning
  (:func:`read_images` yields them one at a time, for streaming). Training data is small next
  to memory: IAM's 6161 lines at 64 px height are ~0.35 GB.
* :func:`drop_infeasible` drops (and counts) examples too narrow for CTC to emit their text;
  :func:`ctc_min_widths` gives each example's narrowest feasible width.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator, Sequence

import numpy as np

from tfnhr.charset import Charset
from tfnhr.data.images import ImageReadError, load_gray, scale_to_height
from tfnhr.runtime.progress import Progress


@dataclasses.dataclass(frozen=True)
class Sample:
    """One line or word: ``id`` (e.g. ``a01-000u-00``), ``text`` (spaces between words),
    ``image_path`` (a grayscale image file, dark ink on a light background)."""

    id: str
    text: str
    image_path: str


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
    usable, unreadable, empty = 0, [], []
    bar = Progress(len(samples), f"reading {what}", enabled=progress)
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


def ctc_min_widths(data: TextImageSet, charset: Charset, width_reduction: int) -> list[int]:
    """Per example, the narrowest image width (px) at which CTC can still emit its text:
    :func:`ctc_frames_needed` output columns of ``width_reduction`` input columns each (the
    floor an augmentation that narrows images keeps, :class:`tfnhr.data.augment.Augmenter`)."""
    return [width_reduction * ctc_frames_needed(charset.encode(text, count_unknown=False)) for text in data.texts]


def drop_infeasible(data: TextImageSet, charset: Charset, width_reduction: int,
                    what: str = "training data") -> TextImageSet:
    """Drop examples too narrow for CTC to emit their text (``ceil(W / width_reduction)``
    columns < :func:`ctc_frames_needed`), with a counted warning; such examples have infinite
    loss and would turn the gradients into NaN."""
    # ceil(W / r) >= frames  <=>  W > r * (frames - 1)
    keep = [i for i, (image, floor) in enumerate(zip(data.images, ctc_min_widths(data, charset, width_reduction)))
            if image.shape[1] > floor - width_reduction]
    if len(keep) < len(data):
        dropped = [data.ids[i] for i in sorted(set(range(len(data))) - set(keep))]
        warnings.warn(f"{what}: dropped {len(dropped)} of {len(data)} examples too narrow for their "
                      f"transcription at {width_reduction} input columns per output column "
                      f"(first: {dropped[:3]}); scale images up or use narrower blocks", stacklevel=2)
    if not keep:
        raise ValueError(f"{what}: every example is too narrow for its transcription")
    return data.subset(keep)
