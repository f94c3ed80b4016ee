"""IAM reading: transcription parsing, image paths, splits, skipped images, errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.iam_tree import write_iam_tree
from tfnhr.data.formats import iam
from tfnhr.data.formats.iam import IamRecord, SkippedSamplesWarning
from tfnhr.data.images import load_gray

EXPECTED_LINES = [
    IamRecord("a01-000u-00", True, 154, (408, 746, 1661, 89), "A MOVE to stop Mr. Gaitskell from"),
    IamRecord("a01-000u-01", True, 156, (395, 932, 1850, 105),
              "nominating any more Labour life Peers"),
    IamRecord("a01-000u-02", False, 157, (408, 1106, 1632, 88),
              "is to be made at a meeting of Labour"),
    IamRecord("a01-007-00", True, 160, (380, 700, 1500, 90), "Mr. Michael Foot has"),
    IamRecord("a01-007-01", True, 161, (390, 800, 1400, 92), "put down a resolution"),
    IamRecord("b02-010-00", True, 170, (400, 700, 1600, 95), "on the subject and he"),
    IamRecord("b02-010-01", True, 171, (401, 800, 1620, 96), "is to be backed"),
    IamRecord("c03-003-00", True, 150, (300, 600, 1200, 80), "by Mr. Will Griffiths,"),
    IamRecord("d04-050-00", True, 149, (310, 610, 1210, 81), "M.P. for Manchester"),
]
EXPECTED_WORDS = [
    IamRecord("a01-000u-00-00", True, 154, (408, 768, 27, 51), "A", "AT"),
    IamRecord("a01-000u-00-01", False, 154, (-1, -1, -1, -1), "MOVE", "NN"),
    IamRecord("a01-000u-01-00", True, 156, (395, 932, 441, 75), "nominating", "VBG"),
    IamRecord("a01-007-00-00", True, 160, (380, 700, 60, 50), "Mr.", "NPT"),
    IamRecord("a01-007-00-01", True, 160, (450, 700, 150, 52), "Michael", "NP"),
    IamRecord("b02-010-00-00", True, 170, (400, 700, 40, 48), "on", "IN"),
    IamRecord("b02-010-00-01", True, 170, (450, 700, 60, 48), "the", "ATI"),
    IamRecord("c03-003-00-00", True, 150, (300, 600, 40, 45), "by", "IN"),
    IamRecord("d04-050-00-00", True, 149, (310, 610, 80, 44), "M.P.", "NP"),
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return write_iam_tree(tmp_path_factory.mktemp("iam"))


def load_skipping(expected_message: str, *args, **kwargs) -> list[str]:
    """Ids of ``load_samples(*args, **kwargs)``, which must warn once with ``expected_message``
    (a regex)."""
    with pytest.warns(SkippedSamplesWarning, match=expected_message) as record:
        samples = iam.load_samples(*args, **kwargs)
    assert len(record) == 1
    return [sample.id for sample in samples]


# --- parsing ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, expected", [("lines", EXPECTED_LINES), ("words", EXPECTED_WORDS)])
def test_parse_transcriptions(tree, kind, expected):
    assert iam.parse_transcriptions(tree.root / "ascii" / f"{kind}.txt", kind) == expected


@pytest.mark.parametrize("row, problem", [
    ("a01-000u-00 ok 154 19 408 746 1661", "at least 9 fields"),
    ("a01-000u-00 maybe 154 19 408 746 1661 89 A|MOVE", "'ok' or 'err'"),
    ("a01-000u-00 ok 154 x 408 746 1661 89 A|MOVE", "integers"),
    ("a01-000u ok 154 19 408 746 1661 89 A|MOVE", "3 '-'-separated parts"),
])
def test_malformed_row_names_file_and_line(tmp_path, row, problem):
    path = tmp_path / "lines.txt"
    path.write_text(f"# comment\na01-000u-01 ok 156 19 395 932 1850 105 fine\n\n{row}\n")
    with pytest.raises(ValueError, match=problem) as error:
        iam.parse_transcriptions(path, "lines")
    assert f"{path}:4:" in str(error.value)


def test_words_row_needs_four_id_parts(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("a01-000u-00 ok 154 408 768 27 51 AT A\n")
    with pytest.raises(ValueError, match=f"{path}:1:.*4 '-'-separated parts"):
        iam.parse_transcriptions(path, "words")


def test_image_path():
    assert iam.image_path("/iam", "lines", "a01-000u-00") == Path(
        "/iam/lines/a01/a01-000u/a01-000u-00.png")
    assert iam.image_path("/iam", "words", "a01-000u-00-01") == Path(
        "/iam/words/a01/a01-000u/a01-000u-00-01.png")
    with pytest.raises(ValueError, match="kind"):
        iam.image_path("/iam", "forms", "a01-000u-00")


# --- loading ---------------------------------------------------------------------------------

def test_load_all_lines_skips_and_counts_missing_and_empty_images(tree):
    with pytest.warns(SkippedSamplesWarning) as record:
        samples, summary = iam.load_samples_with_summary(tree.root, "lines")
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith("skipped 3 of 9 lines: 1 row marked err (--keep-err keeps such rows), "
                              "1 missing image (first: ")
    assert "a01-007-01.png), 1 empty file (first: " in message
    assert message.endswith("b02-010-01.png)")
    assert [(s.id, s.text) for s in samples] == [
        (r.id, r.text) for r in EXPECTED_LINES
        if r.ok and r.id not in ("a01-007-01", "b02-010-01")]
    assert (summary.rows, summary.err_rows, summary.candidates, summary.loaded) == (9, 1, 8, 6)
    assert len(summary.missing) == len(summary.empty) == 1
    for sample in samples:
        assert sample.image_path == str(iam.image_path(tree.root, "lines", sample.id))
        np.testing.assert_array_equal(load_gray(sample.image_path), tree.images[sample.id])


def test_keep_err(tree):
    with pytest.warns(SkippedSamplesWarning, match="skipped 2 of 9 lines"):
        samples, summary = iam.load_samples_with_summary(tree.root, "lines", keep_err=True)
    assert ("a01-000u-02", "is to be made at a meeting of Labour") in [
        (s.id, s.text) for s in samples]
    assert summary.err_kept and summary.loaded == 7
    # keep_err applies to words too: the err word has an image
    ids = load_skipping("skipped 2 of 9 words", tree.root, "words", keep_err=True)
    assert "a01-000u-00-01" in ids


def test_official_split(tree):
    ids = iam.read_split_ids(tree.root)
    assert ids == {"train": {"a01-000u-00", "a01-000u-01", "a01-000u-02"},
                   "val": {"a01-007-00", "a01-007-01"},
                   "test": {"b02-010-00", "b02-010-01"}}
    assert iam.read_split_ids(tree.root, include_validation2=True)["val"] == {
        "a01-007-00", "a01-007-01", "c03-003-00"}
    assert load_skipping(r"skipped 1 of 3 lines: 1 row marked err \(--keep-err keeps such rows\)$",
                         tree.root, "lines", "train") == ["a01-000u-00", "a01-000u-01"]
    assert load_skipping(r"skipped 1 of 2 lines: 1 missing image \(first: .*a01-007-01\.png\)$",
                         tree.root, "lines", "val") == ["a01-007-00"]
    assert load_skipping(r"skipped 1 of 2 lines: 1 empty file \(first: .*b02-010-01\.png\)$",
                         tree.root, "lines", "test") == ["b02-010-00"]


def test_official_split_words_follow_their_lines(tree):
    assert load_skipping("skipped 1 of 3 words: 1 row marked err", tree.root, "words",
                         "train") == ["a01-000u-00-00", "a01-000u-01-00"]
    assert load_skipping("skipped 1 of 2 words: 1 missing image", tree.root, "words",
                         "val") == ["a01-007-00-00"]
    assert load_skipping("skipped 1 of 2 words: 1 empty file", tree.root, "words",
                         "test") == ["b02-010-00-01"]


def test_seed_style_split_folder_with_form_ids(tree):
    assert load_skipping("skipped 1 of 4 lines: 1 row marked err", tree.root, "lines", "train", split=tree.seed_split) == [
        "a01-000u-00", "a01-000u-01", "c03-003-00"]
    assert load_skipping("1 missing image", tree.root, "lines", "val",
                         split=str(tree.seed_split)) == ["a01-007-00"]
    assert load_skipping("1 empty file", tree.root, "lines", "test",
                         split=tree.seed_split) == ["b02-010-00", "d04-050-00"]
    assert load_skipping("skipped 1 of 4 words: 1 row marked err", tree.root, "words", "train", split=tree.seed_split) == [
        "a01-000u-00-00", "a01-000u-01-00", "c03-003-00-00"]
    assert load_skipping("1 empty file", tree.root, "words", "test",
                         split=tree.seed_split) == ["b02-010-00-01", "d04-050-00-00"]


@pytest.mark.parametrize("names", [("train", "cv.lst", "test.txt"),
                                   ("train.txt", "validation", "test.lst")])
def test_split_folder_file_names(tmp_path, names):
    for name, content in zip(names, ("a01-000u", "a01-007", "b02-010")):
        (tmp_path / name).write_text(content + "\n")
    assert iam.read_split_ids("/unused", tmp_path) == {
        "train": {"a01-000u"}, "val": {"a01-007"}, "test": {"b02-010"}}


def test_prefixes_stop_at_dashes():
    assert iam.in_ids("a01-000u-00-01", {"a01-000u"})
    assert iam.in_ids("a01-000u-00-01", {"a01-000u-00"})
    assert iam.in_ids("a01-000u-00", {"a01-000u-00"})
    assert not iam.in_ids("a01-000u-00", {"a01-000"})
    assert not iam.in_ids("a01-000u-01", {"a01-000u-0"})


# --- errors ----------------------------------------------------------------------------------

def test_not_an_iam_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"not an IAM folder: expected .*ascii/lines\.txt"
                                                r".*registration at https://fki"):
        iam.load_samples(tmp_path)
    (tmp_path / "ascii").mkdir()
    (tmp_path / "ascii" / "words.txt").write_text("")
    with pytest.raises(FileNotFoundError, match=r"no words/ image folder"):
        iam.load_samples(tmp_path, "words")


def test_missing_official_split_file(tree, tmp_path):
    root = tmp_path / "iam"
    shutil.copytree(tree.root, root)
    (root / iam.OFFICIAL_SPLIT_DIR / "validationset2.txt").unlink()
    assert iam.read_split_ids(root)["val"] == {"a01-007-00", "a01-007-01"}
    with pytest.raises(FileNotFoundError, match=r"validationset2\.txt not found"):
        iam.read_split_ids(root, include_validation2=True)
    (root / iam.OFFICIAL_SPLIT_DIR / "validationset1.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"validationset1\.txt not found: unpack IAM's "
                                                r"largeWriterIndependentTextLineRecognitionTask"):
        iam.load_samples(root, "lines", "train")


def test_split_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="split folder .* not found"):
        iam.read_split_ids("/unused", tmp_path / "nowhere")
    (tmp_path / "train.txt").write_text("a01-000u\n")
    (tmp_path / "valid.txt").write_text("a01-007\n")
    with pytest.raises(FileNotFoundError, match="no test split file .* looked for test, test.txt"):
        iam.read_split_ids("/unused", tmp_path)
    (tmp_path / "test.txt").write_text("a01-007\n")
    with pytest.raises(ValueError, match="1 ids are in both val and test"):
        iam.read_split_ids("/unused", tmp_path)
    (tmp_path / "train.lst").write_text("a01-000u\n")
    with pytest.raises(ValueError, match="several train split files"):
        iam.read_split_ids("/unused", tmp_path)


def test_bad_arguments(tree):
    with pytest.raises(ValueError, match="kind"):
        iam.load_samples(tree.root, "pages")
    with pytest.raises(ValueError, match="subset"):
        iam.load_samples(tree.root, "lines", "validation")
