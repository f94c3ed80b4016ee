"""Running a trained recognizer on images: the one place that scales, batches by pixels and runs
the model (used by ``tfnhr evaluate``/``recognize``/``serve``/``dump``, the validation callback,
the main job and notebooks).

Images are uint8 gray ``[H_i, W_i]`` (0 = ink), any size; they are scaled to the model's
``input_height`` (if it has one), their widths to its ``stroke_spacing`` (if it was trained
so: :meth:`Transcriber.prepare`), and run in batches of at most ``batch_pixels`` pixels, in
order. With several ``widths`` or ``shears`` each image is also read in those views (sheared,
then resized horizontally) and the texts the views agree on are kept (:mod:`tfnhr.recognition.views`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from tfnhr.recognition.alignment import Reading, align
from tfnhr.config.choices import DEFAULT_BATCH_PIXELS
from tfnhr.data.batches import pixel_budget_batches
from tfnhr.data.dataset import IMAGES_SPEC, ragged_batch
from tfnhr.data.images import scale_to_height
from tfnhr.data.spacing import normalize_spacing
from tfnhr.decoding import Decoder, GreedyDecoder, log_softmax
from tfnhr.models.ctc_model import CtcModel
from tfnhr.recognition.views import View, decode_views, views


ENSEMBLE_IMAGES = 256
"""Images read (in every view of :attr:`Transcriber.views`) and decoded before the next ones:
bounds the scores held at once to theirs."""


_GRAPHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def inference_graph(model: CtcModel) -> Callable[[tf.RaggedTensor], tf.RaggedTensor]:
    """``model(images, training=False)`` as one TensorFlow graph for every batch shape (ragged
    ``[B, (H), (W), 1]`` float32 images -> ``[B, (T), K]`` column scores), traced at its first call
    (about 2 s for the main job's recognizer) and kept for the model's lifetime, so that every
    :class:`Transcriber` of the same model (a validation round's, the width ensemble's views) runs
    the same graph: 2.1x faster than eager calls on the main job's 200 validation lines, 5x on a
    single line (docs/results.md#reading-lines). The graph reads the model's
    variables, so weights assigned later (the weight average, restored best weights) are used."""
    graph = _GRAPHS.get(model)
    if graph is None:
        reference = weakref.ref(model)  # the cache must not keep the model alive
        graph = tf.function(lambda images: reference()(images, training=False), input_signature=[IMAGES_SPEC],
                            autograph=False)
        _GRAPHS[model] = graph
    return graph


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
      widths: factors of each image's width to read it at.
      shears: shears (px per px of height) to read each image at, each at every factor of ``widths``
        (:func:`~tfnhr.recognition.views.views`, one model call per view). With more than one view the
        texts are those the views agree on (:func:`~tfnhr.recognition.views.agreed_readings`), their
        confidence and alignment from the view that read them best.
    """

    def __init__(self, model: CtcModel, decoder: Decoder | None = None, batch_pixels: int = DEFAULT_BATCH_PIXELS,
                 widths: Sequence[float] = (1.0,), shears: Sequence[float] = (0.0,)) -> None:
        if batch_pixels < 1:
            raise ValueError(f"the pixel budget must be positive, got {batch_pixels}")
        self.model, self.batch_pixels, self.views = model, batch_pixels, views(widths, shears)
        self.decoder = decoder if decoder is not None else GreedyDecoder(model.charset)

    def prepare(self, gray: np.ndarray) -> np.ndarray:
        """``gray`` as the model was trained to see it, before any view: a model trained on
        lines of normalized stroke spacing gets the line at its ``input_height`` with the width
        scaled to that spacing (:func:`~tfnhr.data.spacing.normalize_spacing`); any other model
        gets ``gray`` itself."""
        if self.model.stroke_spacing is None:
            return gray
        return normalize_spacing(scale_to_height(gray, self.model.input_height), self.model.stroke_spacing)

    def batches(self, grays: Sequence[np.ndarray]) -> Iterator[tuple[list[int], tf.RaggedTensor]]:
        """``(indices, images)`` per batch: the images' positions in ``grays`` and the scaled images
        as ragged ``[B, (H), (W), 1]`` float32 ink, in order. ``grays`` as :meth:`prepare` gives them."""
        scaled = [scale_to_height(gray, self.model.input_height) for gray in grays]
        for batch in pixel_budget_batches([gray.size for gray in scaled], self.batch_pixels, range(len(scaled))):
            images, _ = ragged_batch([scaled[i] for i in batch], [[] for _ in batch])
            yield batch, images

    def scores(self, grays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Per-image column scores ``[T_i, K]`` (float32 logits), in order, of ``grays`` as
        :meth:`prepare` gives them."""
        scores: list[np.ndarray | None] = [None] * len(grays)
        run = inference_graph(self.model)
        for batch, images in self.batches(grays):
            for index, example_scores in zip(batch, run(images)):
                scores[index] = tf.cast(example_scores, tf.float32).numpy()  # mixed precision: float32
        return scores

    def view_scores(self, grays: Sequence[np.ndarray]) -> list[list[np.ndarray]]:
        """Per view of :attr:`views`, the :meth:`scores` of the images (after :meth:`prepare`) in that view."""
        return self._view_scores_of_prepared([self.prepare(gray) for gray in grays])

    def _view_scores_of_prepared(self, prepared: Sequence[np.ndarray]) -> list[list[np.ndarray]]:
        """:meth:`view_scores` of images :meth:`prepare` gave."""
        return [self.scores([view.image(gray) for gray in prepared]) for view in self.views]

    def _prepared_parts(self, grays: Sequence[np.ndarray]
                        ) -> Iterator[tuple[list[np.ndarray], list[list[np.ndarray]]]]:
        """Per :data:`ENSEMBLE_IMAGES` images, in order: those images after :meth:`prepare` and
        their :meth:`view_scores`."""
        for start in range(0, len(grays), ENSEMBLE_IMAGES):
            prepared = [self.prepare(gray) for gray in grays[start:start + ENSEMBLE_IMAGES]]
            yield prepared, self._view_scores_of_prepared(prepared)

    def view_score_parts(self, grays: Sequence[np.ndarray]) -> Iterator[list[list[np.ndarray]]]:
        """:meth:`view_scores` of :data:`ENSEMBLE_IMAGES` images at a time, in order, so that the
        views' scores of only that many are held at once."""
        for _, view_scores in self._prepared_parts(grays):
            yield view_scores

    def agreed(self, grays: Sequence[np.ndarray]) -> Iterator[tuple[str, np.ndarray, View, np.ndarray]]:
        """Per image, in order: its decoded text (the views' agreed text with several
        :attr:`views`), the column scores it was read from, the view of those scores and the image
        as :meth:`prepare` gave it (the one the views were made of)."""
        for prepared, view_scores in self._prepared_parts(grays):
            texts, readers = decode_views(self.decoder, view_scores, self.model.charset)
            for i, (text, reader) in enumerate(zip(texts, readers)):
                yield text, view_scores[reader][i], self.views[reader], prepared[i]

    def texts_and_scores(self, grays: Sequence[np.ndarray]) -> tuple[list[str], list[np.ndarray]]:
        """Per image, in order: its decoded text and the column scores it was read from (:meth:`agreed`)."""
        texts: list[str] = []
        scores: list[np.ndarray] = []
        for text, example_scores, _, _ in self.agreed(grays):
            texts.append(text)
            scores.append(example_scores)
        return texts, scores

    def transcribe(self, grays: Sequence[np.ndarray]) -> list[str]:
        """One decoded text per image, in order."""
        return self.texts_and_scores(grays)[0]

    def read(self, grays: Sequence[np.ndarray]) -> list[Reading]:
        """A :class:`Reading` per image, in order; spans are in the pixel columns of the images
        as given (before scaling to the model's height or a view's shear and width factor; a
        sheared view's columns are taken at the line's middle row)."""
        readings = []
        for gray, (text, example_scores, view, prepared) in zip(grays, self.agreed(grays)):
            margin = view.margin(prepared.shape[0])
            alignment = align(example_scores, self.model.charset, prepared.shape[1] + 2 * margin)
            alignment = alignment.shifted(-margin, prepared.shape[1]) if margin else alignment
            if prepared is not gray:
                alignment = alignment.scaled(gray.shape[1] / prepared.shape[1])
            readings.append(Reading(text, confidence(example_scores), alignment if alignment.text == text else None))
        return readings

    def recognize(self, grays: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        """``(text, confidence)`` per image, in order (:func:`confidence` of its scores)."""
        texts, scores = self.texts_and_scores(grays)
        return list(zip(texts, map(confidence, scores)))
