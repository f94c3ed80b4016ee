"""Text-image samples (:mod:`tfnhr.data.samples`): the frames CTC needs against a brute-force
search over alignments, dropping examples too narrow for their text, and loading images with
skipped bad samples and height scaling."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from PIL import Image

from tests.helpers.images import random_gray as _gray
from tests.helpers.recorded_warnings import caught as _caught
from tfnhr.charset import Charset
from tfnhr.data.samples import Sample, TextImageSet, ctc_frames_needed, ctc_min_widths, drop_infeasible, load_set


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


def test_ctc_min_widths_are_feasible_and_a_block_narrower_is_not():
    charset, texts = Charset("ab"), ["aa", "ab", "a", "aXa", "abba"]
    floors = ctc_min_widths(TextImageSet([_gray(3, 1)] * len(texts), texts, texts), charset, 4)
    assert floors == [12, 8, 4, 12, 20]
    at_floor = TextImageSet([_gray(3, w) for w in floors], texts, texts)
    assert _caught(drop_infeasible, at_floor, charset, 4)[0].ids == texts
    wide_enough = [text for text, floor in zip(texts, floors) if floor > 4]  # "a" cannot lose a block
    a_block_less = TextImageSet([_gray(3, w - 4) for w in floors if w > 4], wide_enough, wide_enough)
    with pytest.raises(ValueError, match="too narrow"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        drop_infeasible(a_block_less, charset, 4)


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
