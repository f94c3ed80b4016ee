"""Best-path alignment: character and word spans and confidences against a hand-worked example and
a NumPy loop; word spans from CTC-like peaks on rendered lines overlap the true word boxes; the
recognizer's readings carry spans only when the decoder's text is the best path's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfnhr.recognition.alignment import Reading, Span, align
from tfnhr.charset import Charset
from tfnhr.data.synthetic.handwriting import render_example
from tfnhr.recognition.transcriber import Transcriber
from tests.helpers.peak_columns import interval_iou, peak_labels, peak_scores
from tests.helpers.tiny_models import tiny_recognizer

ABC = Charset("ab c")


def test_a_worked_example():
    """Columns: blank, a, a, blank, b, blank, space, blank, c, blank (gaps of 1 column, so spans
    reach half a column into them; the ends reach half the mean gap, 0.5 column); 10 px per column."""
    a, b, space, c = (ABC.encode(char)[0] for char in "ab c")
    labels = [0, a, a, 0, b, 0, space, 0, c, 0]
    probabilities = [0.9, 0.8, 0.6, 0.9, 0.7, 0.9, 0.5, 0.9, 0.95, 0.9]
    alignment = align(peak_scores(labels, ABC.num_classes, probabilities), ABC, image_width=100)
    assert alignment.text == "ab c"
    spans = [(span.text, span.x0, span.x1) for span in alignment.chars]
    assert spans == [("a", 5, 35), ("b", 35, 55), (" ", 55, 75), ("c", 75, 95)]
    assert [(span.text, span.x0, span.x1) for span in alignment.words] == [("ab", 5, 55), ("c", 75, 95)]

    def geometric_mean(first: int, end: int) -> float:  # the columns a span touches
        return math.exp(sum(math.log(p) for p in probabilities[first:end]) / (end - first))

    assert alignment.chars[0].confidence == pytest.approx(geometric_mean(0, 4))
    assert alignment.words[0].confidence == pytest.approx(geometric_mean(0, 6))
    assert alignment.words[1].confidence == pytest.approx(geometric_mean(7, 10))


def test_all_blank_and_empty_scores_give_no_spans():
    assert align(peak_scores([0, 0, 0], ABC.num_classes, [0.9] * 3), ABC, 30) == align(
        np.zeros((0, ABC.num_classes)), ABC, 0)
    assert align(np.zeros((0, ABC.num_classes)), ABC, 0).chars == ()


def test_a_single_character_spans_the_whole_line_at_most():
    a = ABC.encode("a")[0]
    alignment = align(peak_scores([0, a, 0], ABC.num_classes, [0.9, 0.9, 0.9]), ABC, 30)
    assert [(s.x0, s.x1) for s in alignment.words] == [(10, 20)]  # no gap to share: the run itself


def test_spans_scale_with_the_image():
    span = Span("ab", 0.5, 10, 30)
    assert span.scaled(2) == Span("ab", 0.5, 20, 60)
    reading = Reading("ab", 0.5, align(peak_scores([1, 2], ABC.num_classes, [0.9, 0.9]), ABC, 20))
    assert [(s.x0, s.x1) for s in reading.scaled(0.5).alignment.chars] == [(0, 5), (5, 10)]
    assert Reading("x", 0.5).scaled(3) == Reading("x", 0.5)


@pytest.mark.parametrize("index", range(6))
def test_word_spans_from_peaks_at_the_characters_overlap_the_rendered_word_boxes(index):
    """A CTC-like column model of a rendered line (one output column per 4 px, each character a
    one-column peak at its share of its word's box, a space peak in the middle of each gap): every
    word of 3 or more characters gets a span of IoU >= 0.7 with its true box, every word >= 0.4."""
    image, text, boxes, _ = render_example(11, "lines", "train", index)
    charset = Charset(sorted(set(text)))
    labels = peak_labels(text, boxes, image.shape[1], charset, pixels_per_column=4)
    words = text.split()
    alignment = align(peak_scores(labels, charset.num_classes, [0.9] * len(labels)), charset, image.shape[1])
    assert alignment.text == text
    overlaps = [interval_iou((span.x0, span.x1), (box[0], box[2])) for span, box in zip(alignment.words, boxes)]
    assert min(overlaps) >= 0.4
    assert all(o >= 0.7 for o, word in zip(overlaps, words) if len(word) >= 3), list(zip(words, overlaps))


def test_shifted_spans_move_and_clip_to_the_image():
    alignment = align(peak_scores([0, 1, 0, 2, 0], ABC.num_classes, [0.9] * 5), ABC, image_width=50)
    assert [(span.x0, span.x1) for span in alignment.chars] == [(5, 25), (25, 45)]  # half gaps, ends by half a gap
    moved = alignment.shifted(-8, 30)
    assert [(span.x0, span.x1) for span in moved.chars] == [(0, 17), (17, 30)]
    assert [(span.x0, span.x1) for span in moved.words] == [(0, 30)] and moved.text == alignment.text == "ab"


def test_readings_carry_spans_only_for_the_best_path_text():
    model = tiny_recognizer()
    grays = [np.random.default_rng(seed).integers(0, 256, size=(16, 40 + 20 * seed), dtype=np.uint8)
             for seed in range(3)]
    greedy = Transcriber(model).read(grays)
    assert [reading.text for reading in greedy] == Transcriber(model).transcribe(grays)
    for reading, gray in zip(greedy, grays):
        assert reading.alignment is not None and reading.alignment.text == reading.text
        assert all(0 <= s.x0 < s.x1 <= gray.shape[1] for s in reading.alignment.chars)

    class Shouting:  # a decoder whose text is not the best path's (as a language model's may be)
        def decode_batch(self, scores):
            return [text.upper() + "!" for text in Transcriber(model).decoder.decode_batch(scores)]

    shouted = Transcriber(model, Shouting()).read(grays)
    assert [r.text for r in shouted] == [r.text.upper() + "!" for r in greedy]
    assert all(r.alignment is None for r in shouted)
