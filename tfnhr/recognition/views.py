"""Reading a line in several views and keeping the reading the views agree on (test-time
width and shear ensemble).

A recognizer trained on some hands reads an unseen hand best at the width and slant its training
hands had: a narrow script read at 1.2x its width, say, or a slanted one straightened. Since the
right view is not known for a new hand, each image is read in every :class:`View`: sheared by
each factor of ``shears`` (a horizontal shift of ``shear`` px per px of height about the middle
row, the image widened so that no ink leaves it), then resized horizontally by each factor of
``widths`` (the height unchanged). Each view's decoding proposes a text, and the text kept is the
one most likely under a mixture of the views: the highest CTC likelihood
(:func:`ctc_log_likelihoods`) averaged over all the views' column scores, so that a text one
view reads well wins over one that every view finds middling (:func:`best_candidate`), plus what
the decoder's language model adds to the text (``reading_scores`` of :mod:`tfnhr.decoding`; zero
for greedy decoding and an LM of words as written): the views' readings are weighed as the beam search weighed each view's.
The cost is one model call per view; the decoders and the model are unchanged.

Measured (docs/lab/width-ensemble.md; the default widths 0.7, 0.8, ..., 1.4 and shears
-0.2, 0, 0.2 were chosen on validation sets): the greedy CER of the same trained model went from
34.1 to 30.5 % (the main job's validation fonts) and from 9.9 to 7.5 % (its test fonts) at the 8
widths, and on lines of real handwritten digits from 4.27 / 4.03 / 4.27 % to 3.27 / 3.32 / 3.46 %
(test, three training seeds); the 3 shears on top lowered it further on 11 of the 12 sets measured.
The mixture (rather than the product of the views, summed log-likelihoods) took the 24 views'
greedy CER on the main job's validation fonts from 17.13 to 15.50 % (1.6-1.7 points on each of
three models), level on its test fonts and on the digit lines. Weighing the readings with an LM
of tokens backed by word frequencies (:mod:`tfnhr.lm`) took beam + LM in 24 views on the full
preset's model from 8.06 % (the LM as written, views by likelihood) to 5.41 % there; weighing
with the LM as written made it worse (8.44 %), so such an LM's ``reading_scores`` are zero
(docs/lab/language-model.md).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence

import cv2
import numpy as np

from tfnhr.charset import BLANK_INDEX, Charset
from tfnhr.data.images import scale_width
from tfnhr.data.samples import ctc_frames_needed
from tfnhr.decoding import Decoder
from tfnhr.config.ranges import SHEAR, WIDTH_FACTOR, Range

CHUNK_CELLS = 1 << 22
"""Most padded column probabilities (16 MiB of float32) scored at once; more texts are scored in turns."""


def check_widths(widths: Sequence[float]) -> tuple[float, ...]:
    """``widths`` as a tuple, or ``ValueError`` if it is empty, repeats a factor or holds one
    outside :data:`tfnhr.config.ranges.WIDTH_FACTOR`."""
    return _check_factors("widths", "a width factor", WIDTH_FACTOR, widths)


def check_shears(shears: Sequence[float]) -> tuple[float, ...]:
    """``shears`` as a tuple, or ``ValueError`` if it is empty, repeats a factor or holds one
    outside :data:`tfnhr.config.ranges.SHEAR`."""
    return _check_factors("shears", "a shear", SHEAR, shears)


def _check_factors(name: str, what: str, allowed: Range, factors: Sequence[float]) -> tuple[float, ...]:
    """``factors`` as a tuple of floats, distinct, at least one, each in the range ``allowed``."""
    factors = tuple(float(factor) for factor in factors)
    if not factors or len(set(factors)) != len(factors):
        raise ValueError(f"{name} must be distinct factors, at least one, got {factors!r}")
    for factor in factors:
        allowed.check(what, factor)
    return factors


@dataclasses.dataclass(frozen=True)
class View:
    """One way to read a line: sheared by ``shear`` (:func:`shear_image`), then resized to
    ``width`` times its width (:func:`scale_width`)."""

    width: float = 1.0
    shear: float = 0.0

    def image(self, gray: np.ndarray) -> np.ndarray:
        """``gray`` (uint8 ``[H, W]``) as this view shows it: uint8 ``[H, W']``."""
        return scale_width(shear_image(gray, self.shear), self.width)

    def margin(self, height: int) -> int:
        """Columns (px of the unscaled sheared image) that the shear adds on each side of an image
        ``height`` px high."""
        return shear_margin(height, self.shear)


def views(widths: Sequence[float] = (1.0,), shears: Sequence[float] = (0.0,)) -> tuple[View, ...]:
    """Every combination of ``shears`` and ``widths`` (checked), shear by shear, each at every width."""
    return tuple(View(width, shear) for shear, width in itertools.product(check_shears(shears), check_widths(widths)))


def shear_margin(height: int, shear: float) -> int:
    """Columns that shearing an image ``height`` px high by ``shear`` shifts its top or bottom row
    by at most (rounded up): the padding :func:`shear_image` adds on each side."""
    return math.ceil(abs(shear) * (height - 1) / 2 - 1e-9)


def shear_image(gray: np.ndarray, shear: float) -> np.ndarray:
    """``gray`` (uint8 ``[H, W]``) sheared about its middle row: pixel ``(y, x)`` moves to column
    ``x + shear * (y - (H - 1) / 2) + m`` of a uint8 ``[H, W + 2 m]`` image, ``m =``
    :func:`shear_margin` (bilinear; the new corners take the image's median grey, its paper);
    the image itself when the margin is 0 (``shear`` 0, or a 1-px-high image). A positive shear moves the
    bottom rows right and the top rows left: an upright stroke then leans back (``\\``)."""
    margin = shear_margin(gray.shape[0], shear)
    if margin == 0:
        return gray
    height, width = gray.shape
    to_sheared = np.float32([[1, shear, margin - shear * (height - 1) / 2], [0, 1, 0]])
    return cv2.warpAffine(gray, to_sheared, (width + 2 * margin, height), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=int(np.median(gray)))


def ctc_log_likelihoods(scores_list: Sequence[np.ndarray], texts: Sequence[str], charset: Charset) -> np.ndarray:
    """``log p(texts[i] | scores_list[i])`` under CTC (float64 ``[N]``): the log of the summed
    probability of every alignment of the text's classes to the ``[T_i, C]`` column logits;
    ``-inf`` where the text cannot be aligned (more frames needed than ``T_i``, or a needed class
    of zero probability); an empty text: the log probability of all blanks."""
    result = np.full(len(texts), -np.inf)
    labels = [charset.encode(text, count_unknown=False) for text in texts]
    rows = [i for i, label in enumerate(labels) if label and ctc_frames_needed(label) <= len(scores_list[i])]
    for i, label in enumerate(labels):
        if not label:
            scores = np.asarray(scores_list[i], np.float64)
            result[i] = float((scores[:, BLANK_INDEX] - np.logaddexp.reduce(scores, axis=1)).sum()) if len(scores) else 0.0
    for chunk in _chunks(sorted(rows, key=lambda i: len(scores_list[i])), [len(scores) for scores in scores_list],
                         charset.num_classes):
        result[chunk] = _forward_log_likelihoods([scores_list[i] for i in chunk], [labels[i] for i in chunk])
    return result


def _forward_log_likelihoods(scores_list: Sequence[np.ndarray], labels: Sequence[Sequence[int]]) -> np.ndarray:
    """CTC's forward recursion (Graves et al. 2006) over several texts at once, in probabilities
    rescaled to sum 1 at every column (the scales' logs summed): float64 ``[N]`` log-likelihoods
    of the non-empty ``labels[i]`` under the ``[T_i, C]`` logits ``scores_list[i]``, ``T_i``
    ascending. Written for this module rather than calling ``tf.nn.ctc_loss``, which also computes
    every class's gradient and takes each text's scores anew: agreeing on the greedy readings of
    200 lines in 24 views took 50.1 s with it and 8.0 s with this (one thread, the same texts and
    views chosen; docs/lab/width-ensemble.md)."""
    count, classes = len(labels), scores_list[0].shape[1]
    columns = np.array([len(scores) for scores in scores_list])
    sizes = np.array([2 * len(label) + 1 for label in labels])  # blank, label, blank, ..., blank
    states = int(sizes.max())
    extended = np.full((count, states), BLANK_INDEX, np.int64)
    for row, label in enumerate(labels):
        extended[row, 1:sizes[row]:2] = label
    inside = np.arange(states) < sizes[:, None]
    skips = np.zeros((count, states), bool)  # from state s - 2: a label unlike the one before it
    skips[:, 3::2] = extended[:, 3::2] != extended[:, 1:-2:2]
    skips &= inside
    # Softmax once per distinct scores array (the candidates of one image share theirs).
    distinct = {id(scores): scores for scores in scores_list}
    position = {key: index for index, key in enumerate(distinct)}
    owner = np.array([position[id(scores)] for scores in scores_list])[:, None]
    probabilities = np.zeros((len(distinct), int(columns.max()), classes), np.float32)
    for index, scores in enumerate(distinct.values()):
        shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
        probabilities[index, :len(scores)] = shifted / shifted.sum(axis=1, keepdims=True)
    alpha = np.zeros((count, states))
    alpha[:, :2] = probabilities[owner, 0, extended[:, :2]]
    log_scale = np.zeros(count)
    with np.errstate(divide="ignore", invalid="ignore"):
        for column in range(int(columns.max())):
            first = int(np.searchsorted(columns, column, side="right"))  # rows still running (T_i > column)
            now = alpha[first:]
            if column > 0:
                step = now.copy()
                step[:, 1:] += now[:, :-1]
                step[:, 2:] += np.where(skips[first:, 2:], now[:, :-2], 0.0)
                now = step * probabilities[owner[first:], column, extended[first:]] * inside[first:]
            total = now.sum(axis=1)
            log_scale[first:] += np.log(total)
            alpha[first:] = now / np.where(total > 0, total, 1.0)[:, None]
        rows = np.arange(count)
        return np.log(alpha[rows, sizes - 1] + alpha[rows, sizes - 2]) + log_scale


def _chunks(rows: list[int], columns: list[int], classes: int) -> list[list[int]]:
    """``rows`` (sorted by ``columns``) in consecutive groups whose padded column probabilities
    (group size x longest columns x ``classes``) stay within :data:`CHUNK_CELLS` (a row longer
    than that alone)."""
    chunks: list[list[int]] = []
    for i in rows:
        if chunks and (len(chunks[-1]) + 1) * columns[i] * classes <= CHUNK_CELLS:
            chunks[-1].append(i)
        else:
            chunks.append([i])
    return chunks


def decode_views(decoder: Decoder, view_scores: Sequence[Sequence[np.ndarray]],
                 charset: Charset | None = None) -> tuple[list[str], list[int]]:
    """Per image, the text ``decoder`` reads from its column scores ``view_scores[v][i]`` and the
    index ``v`` of the view it is kept from: with one view its reading (index 0), with several
    the text they agree on, weighed with the decoder's ``reading_scores`` (:func:`agreed_readings`;
    needs ``charset``)."""
    texts = decoder.decode_batch([s for scores in view_scores for s in scores])  # one call: one hand-out to a pool
    images = len(view_scores[0])
    view_texts = [texts[v * images:(v + 1) * images] for v in range(len(view_scores))]
    if len(view_texts) == 1:
        return view_texts[0], [0] * len(view_texts[0])
    if charset is None:
        raise ValueError("a width ensemble needs the model's charset")
    return agreed_readings(view_scores, view_texts, charset, decoder.reading_scores)


def agreed_readings(view_scores: Sequence[Sequence[np.ndarray]], view_texts: Sequence[Sequence[str]],
                    charset: Charset, reading_scores: Callable[[Sequence[str]], np.ndarray] | None = None
                    ) -> tuple[list[str], list[int]]:
    """Per image, the text the views agree on, and which view read it best.

    Args:
      view_scores: per view, per image the ``[T, C]`` column logits of the image in that view.
      view_texts: per view, per image the text a decoder read from those scores (the candidates).
      charset: the model's characters.
      reading_scores: texts -> float64 ``[N]`` natural-log scores added to each candidate's (a
        decoder's LM, ``reading_scores`` of :mod:`tfnhr.decoding`); ``None``: none.

    Returns ``(texts, views)``: per image the candidate with the highest CTC likelihood under
    a mixture of the views (:func:`best_candidate`) plus its ``reading_scores`` (ties: the first
    view's), and the index of the view, among those whose decoding gave that text, under which it
    is most likely (whose scores give the text's confidence and alignment).
    """
    images = len(view_texts[0])
    candidates = [list(dict.fromkeys(texts[i] for texts in view_texts)) for i in range(images)]
    pairs = [(i, text) for i in range(images) for text in candidates[i]]
    per_view = np.stack([ctc_log_likelihoods([scores[i] for i, _ in pairs], [text for _, text in pairs], charset)
                         for scores in view_scores])  # [views, pairs]
    added = np.zeros(len(pairs)) if reading_scores is None else np.asarray(reading_scores([text for _, text in pairs]))
    chosen_texts, chosen_views, start = [], [], 0
    for i in range(images):
        stop = start + len(candidates[i])
        best = start + best_candidate(per_view[:, start:stop], added[start:stop])
        text = pairs[best][1]
        readers = [v for v, texts in enumerate(view_texts) if texts[i] == text]
        chosen_texts.append(text)
        chosen_views.append(max(readers, key=lambda v: per_view[v, best]))
        start = stop
    return chosen_texts, chosen_views


def best_candidate(log_likelihoods: np.ndarray, added: np.ndarray | None = None) -> int:
    """Index of the candidate most likely under a mixture of the views, of ``log_likelihoods``
    ``[views, candidates]``: the highest ``log(sum_v exp(log_likelihoods[v]))`` (the mean
    probability over the views, up to a constant) plus ``added[candidate]`` (an LM's score,
    natural log; ``None``: nothing), i.e. the text that some view reads well, since the right
    view of an unseen hand is not known beforehand. A view that cannot align a candidate
    (``-inf``) gives it probability 0; ties and a candidate set no view aligns: the first candidate."""
    with np.errstate(divide="ignore"):
        mixture = np.logaddexp.reduce(log_likelihoods, axis=0)
    return int(np.argmax(mixture if added is None else mixture + added))
