"""Reading a line at several widths and keeping the reading the widths agree on (test-time
width ensemble).

A recognizer trained on some hands reads an unseen hand best at the width its training hands
had: a narrow script read at 1.2x its width, say. Since the right factor is not known for a new
hand, each image is read at every factor of ``widths`` (the image resized horizontally, its
height unchanged); each width's decoding proposes a text, and the text kept is the one with the
highest CTC log-likelihood summed over all the widths' column scores
(:func:`ctc_log_likelihoods`), a product of experts over the widths. The cost is one model call
per width; the decoders and the model are unchanged.

Measured (docs/performance.md, "Width ensemble"; the default widths 0.7, 0.8, ..., 1.4 were
chosen on validation sets): the greedy CER of the same trained model went from 34.1 to 30.5 %
(the main job's validation fonts) and from 9.9 to 7.5 % (its test fonts), and on lines of real
handwritten digits from 4.27 / 4.03 / 4.27 % to 3.27 / 3.32 / 3.46 % (test, three training seeds).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
import tensorflow as tf

from tfnhr.charset import BLANK_INDEX, Charset
from tfnhr.data.samples import ctc_frames_needed
from tfnhr.decoding import Decoder
from tfnhr.ranges import WIDTH_FACTOR

_NEVER = -1e4
"""Logit of a class a padded column can never emit (its blank gets 0)."""
CHUNK_LOGITS = 1 << 24
"""Most padded logits (64 MiB of float32) scored in one CTC call; more texts are scored in turns."""


def check_widths(widths: Sequence[float]) -> tuple[float, ...]:
    """``widths`` as a tuple, or ``ValueError`` if it is empty, repeats a factor or holds one
    outside :data:`tfnhr.ranges.WIDTH_FACTOR`."""
    widths = tuple(float(width) for width in widths)
    if not widths or len(set(widths)) != len(widths):
        raise ValueError(f"widths must be distinct factors, at least one, got {widths!r}")
    for width in widths:
        WIDTH_FACTOR.check("a width factor", width)
    return widths


def scale_width(gray: np.ndarray, factor: float) -> np.ndarray:
    """``gray`` (uint8 ``[H, W]``) resized to ``[H, max(1, round(W * factor))]`` (area averaging
    when narrowing, bilinear when widening); the image itself when ``factor`` is 1."""
    if factor == 1.0:
        return gray
    width = max(1, round(gray.shape[1] * factor))
    return cv2.resize(gray, (width, gray.shape[0]), interpolation=cv2.INTER_AREA if factor < 1 else cv2.INTER_LINEAR)


def ctc_log_likelihoods(scores_list: Sequence[np.ndarray], texts: Sequence[str], charset: Charset) -> np.ndarray:
    """``log p(texts[i] | scores_list[i])`` under CTC (float64 ``[N]``): the log of the summed
    probability of every alignment of the text's classes to the ``[T_i, C]`` column logits;
    ``-inf`` where the text cannot be aligned (more frames needed than ``T_i``, or an empty text
    where a column scores zero blank probability); an empty text: the log probability of all
    blanks."""
    result = np.full(len(texts), -np.inf)
    labels = [charset.encode(text, count_unknown=False) for text in texts]
    # Only texts that fit: TensorFlow's kernel logs a warning for each one that does not.
    rows = [i for i, label in enumerate(labels) if label and ctc_frames_needed(label) <= len(scores_list[i])]
    for i, label in enumerate(labels):
        if not label:
            scores = np.asarray(scores_list[i], np.float64)
            result[i] = float((scores[:, BLANK_INDEX] - np.logaddexp.reduce(scores, axis=1)).sum()) if len(scores) else 0.0
    for chunk in _chunks(sorted(rows, key=lambda i: len(scores_list[i])), [len(scores) for scores in scores_list],
                         charset.num_classes):
        longest = max(len(scores_list[i]) for i in chunk)
        logits = np.full((len(chunk), longest, charset.num_classes), _NEVER, np.float32)
        logits[:, :, BLANK_INDEX] = 0.0
        for row, i in enumerate(chunk):
            logits[row, :len(scores_list[i])] = scores_list[i]
        loss = tf.nn.ctc_loss(labels=tf.ragged.constant([labels[i] for i in chunk], dtype=tf.int32).to_sparse(),
                              logits=logits, label_length=None, logit_length=[len(scores_list[i]) for i in chunk],
                              logits_time_major=False, blank_index=BLANK_INDEX)
        result[chunk] = -loss.numpy().astype(np.float64)
    return result


def _chunks(rows: list[int], columns: list[int], classes: int) -> list[list[int]]:
    """``rows`` (sorted by ``columns``) in consecutive groups whose padded logits
    (group size x longest columns x ``classes``) stay within :data:`CHUNK_LOGITS` (a row longer
    than that alone)."""
    chunks: list[list[int]] = []
    for i in rows:
        if chunks and (len(chunks[-1]) + 1) * columns[i] * classes <= CHUNK_LOGITS:
            chunks[-1].append(i)
        else:
            chunks.append([i])
    return chunks


def decode_widths(decoder: Decoder, width_scores: Sequence[Sequence[np.ndarray]],
                  charset: Charset | None = None) -> tuple[list[str], list[int]]:
    """Per image, the text ``decoder`` reads from its column scores ``width_scores[w][i]`` and the
    index ``w`` of the width it is kept from: with one width its reading (index 0), with several
    the text they agree on (:func:`agreed_readings`; needs ``charset``)."""
    width_texts = [decoder.decode_batch(scores) for scores in width_scores]
    if len(width_texts) == 1:
        return width_texts[0], [0] * len(width_texts[0])
    if charset is None:
        raise ValueError("a width ensemble needs the model's charset")
    return agreed_readings(width_scores, width_texts, charset)


def agreed_readings(width_scores: Sequence[Sequence[np.ndarray]], width_texts: Sequence[Sequence[str]],
                    charset: Charset) -> tuple[list[str], list[int]]:
    """Per image, the text the widths agree on, and which width read it best.

    Args:
      width_scores: per width, per image the ``[T, C]`` column logits of the image at that width.
      width_texts: per width, per image the text a decoder read from those scores (the candidates).
      charset: the model's characters.

    Returns ``(texts, widths)``: per image the candidate with the highest CTC log-likelihood
    summed over the widths (:func:`best_candidate`; ties: the first width's), and the index of
    the width, among those whose decoding gave that text, under which it is most likely (whose
    scores give the text's confidence and alignment).
    """
    images = len(width_texts[0])
    candidates = [list(dict.fromkeys(texts[i] for texts in width_texts)) for i in range(images)]
    pairs = [(i, text) for i in range(images) for text in candidates[i]]
    per_width = np.stack([ctc_log_likelihoods([scores[i] for i, _ in pairs], [text for _, text in pairs], charset)
                          for scores in width_scores])  # [widths, pairs]
    chosen_texts, chosen_widths, start = [], [], 0
    for i in range(images):
        stop = start + len(candidates[i])
        best = start + best_candidate(per_width[:, start:stop])
        text = pairs[best][1]
        readers = [w for w, texts in enumerate(width_texts) if texts[i] == text]
        chosen_texts.append(text)
        chosen_widths.append(max(readers, key=lambda w: per_width[w, best]))
        start = stop
    return chosen_texts, chosen_widths


def best_candidate(log_likelihoods: np.ndarray) -> int:
    """Index of the candidate with the highest summed log-likelihood over the widths, of
    ``log_likelihoods`` ``[widths, candidates]``. Only widths under which every candidate can be
    aligned (finite) are summed: a width too narrow for a long candidate gives no evidence
    between the candidates rather than a veto. Without such a width: the highest mean over the
    widths where each candidate is finite (the first candidate if none is)."""
    finite = np.isfinite(log_likelihoods)
    comparable = finite.all(axis=1)
    if comparable.any():
        return int(np.argmax(log_likelihoods[comparable].sum(axis=0)))
    counts = finite.sum(axis=0)
    means = np.where(finite, log_likelihoods, 0.0).sum(axis=0) / np.maximum(counts, 1)
    return int(np.argmax(np.where(counts > 0, means, -np.inf)))
