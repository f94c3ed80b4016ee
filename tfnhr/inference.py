"""Running a trained recognizer on images: the one place that scales, batches by pixels and runs
the model (used by ``tfnhr evaluate``/``recognize``/``serve``/``dump``, the validation callback,
the main job and notebooks).

Images are uint8 gray ``[H_i, W_i]`` (0 = ink), any size; they are scaled to the model's
``input_height`` (if it has one) and run in batches of at most ``batch_pixels`` pixels, in order.
With several ``widths`` each image is also read at those factors of its width and the texts
agreed on are kept (:mod:`tfnhr.width_ensemble`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow as tf

from tfnhr.alignment import Reading, align
from tfnhr.choices import DEFAULT_BATCH_PIXELS
from tfnhr.data.batches import pixel_budget_batches
from tfnhr.data.dataset import ragged_batch
from tfnhr.data.images import scale_to_height
from tfnhr.decoding import Decoder, GreedyDecoder, log_softmax
from tfnhr.models.ctc_model import CtcModel
from tfnhr.width_ensemble import check_widths, decode_widths, scale_width


ENSEMBLE_IMAGES = 256
"""Images read (at every width of :attr:`Transcriber.widths`) and decoded before the next ones:
bounds the scores held at once to theirs."""


def confidence(scores: np.ndarray) -> float:
    """Best-path probability per column, geometric mean over the columns (in (0, 1]) of one
    image's column scores ``[T, K]``."""
    if len(scores) == 0:
        return 1.0
    return float(np.exp(log_softmax(scores).max(axis=-1).mean()))


class Transcriber:
    """A recognizer with its decoder and batch size, from gray images to column scores and texts.

    Args:
      model: a trained :class:`~tfnhr.models.CtcModel`.
      decoder: how scores become text (:func:`tfnhr.decoding.make_decoder`); default greedy.
      batch_pixels: pixel budget of one model call (an image larger than it runs alone).
      widths: factors of each image's width to read it at (one model call each); with more than
        ``(1.0,)`` the texts are those the widths agree on (:func:`~tfnhr.width_ensemble.agreed_readings`),
        their confidence and alignment from the width that read them best.
    """

    def __init__(self, model: CtcModel, decoder: Decoder | None = None,
                 batch_pixels: int = DEFAULT_BATCH_PIXELS, widths: Sequence[float] = (1.0,)) -> None:
        if batch_pixels < 1:
            raise ValueError(f"the pixel budget must be positive, got {batch_pixels}")
        self.model, self.batch_pixels, self.widths = model, batch_pixels, check_widths(widths)
        self.decoder = decoder if decoder is not None else GreedyDecoder(model.charset)

    def batches(self, grays: Sequence[np.ndarray]) -> Iterator[tuple[list[int], tf.RaggedTensor]]:
        """``(indices, images)`` per batch: the images' positions in ``grays`` and the scaled images
        as ragged ``[B, (H), (W), 1]`` float32 ink, in order."""
        scaled = [scale_to_height(gray, self.model.input_height) for gray in grays]
        for batch in pixel_budget_batches([gray.size for gray in scaled], self.batch_pixels, range(len(scaled))):
            images, _ = ragged_batch([scaled[i] for i in batch], [[] for _ in batch])
            yield batch, images

    def scores(self, grays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Per-image column scores ``[T_i, K]`` (float32 logits), in order."""
        scores: list[np.ndarray | None] = [None] * len(grays)
        for batch, images in self.batches(grays):
            for index, example_scores in zip(batch, self.model(images, training=False)):
                scores[index] = tf.cast(example_scores, tf.float32).numpy()  # mixed precision: float32
        return scores

    def width_scores(self, grays: Sequence[np.ndarray]) -> list[list[np.ndarray]]:
        """Per factor of :attr:`widths`, the :meth:`scores` of the images resized to it."""
        return [self.scores([scale_width(gray, width) for gray in grays]) for width in self.widths]

    def width_score_parts(self, grays: Sequence[np.ndarray]) -> Iterator[list[list[np.ndarray]]]:
        """:meth:`width_scores` of :data:`ENSEMBLE_IMAGES` images at a time, in order, so that the
        widths' scores of only that many are held at once."""
        for start in range(0, len(grays), ENSEMBLE_IMAGES):
            yield self.width_scores(grays[start:start + ENSEMBLE_IMAGES])

    def texts_and_scores(self, grays: Sequence[np.ndarray]) -> tuple[list[str], list[np.ndarray]]:
        """Per image, in order: its decoded text (the widths' agreed text with several
        :attr:`widths`) and the column scores it was read from."""
        texts: list[str] = []
        scores: list[np.ndarray] = []
        for width_scores in self.width_score_parts(grays):
            part_texts, readers = decode_widths(self.decoder, width_scores, self.model.charset)
            texts += part_texts
            scores += [width_scores[reader][i] for i, reader in enumerate(readers)]
        return texts, scores

    def transcribe(self, grays: Sequence[np.ndarray]) -> list[str]:
        """One decoded text per image, in order."""
        return self.texts_and_scores(grays)[0]

    def read(self, grays: Sequence[np.ndarray]) -> list[Reading]:
        """A :class:`Reading` per image, in order; spans are in the pixel columns of the images
        as given (before scaling to the model's height or a width factor)."""
        readings = []
        for gray, text, example_scores in zip(grays, *self.texts_and_scores(grays)):
            alignment = align(example_scores, self.model.charset, gray.shape[1])
            readings.append(Reading(text, confidence(example_scores), alignment if alignment.text == text else None))
        return readings

    def recognize(self, grays: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        """``(text, confidence)`` per image, in order (:func:`confidence` of its scores)."""
        texts, scores = self.texts_and_scores(grays)
        return list(zip(texts, map(confidence, scores)))
