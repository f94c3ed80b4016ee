"""The embedded synthetic handwriting set: fonts, text splits, rendering, IAM layout and CLI."""

from __future__ import annotations

import argparse
import json
import re
import string

import numpy as np
import pytest
from PIL import ImageFont

from tfnhr.config.choices import SUBSETS
from tfnhr.config.options import OptionError
from tfnhr.commands import synth
from tfnhr.data.synthetic import handwriting, iam_writer
from tfnhr.data.images import load_gray

ALL_FONTS = [path for split in SUBSETS for path in handwriting.font_paths(split, train_fonts="all")]


def glyph(font: ImageFont.FreeTypeFont, char: str) -> np.ndarray:
    """The rendered glyph of ``char`` as a uint8 array (empty when it draws nothing)."""
    mask = font.getmask(char)
    return np.asarray(mask, dtype=np.uint8).reshape(mask.size[1], mask.size[0])


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool((a == b).all())


def test_font_splits_are_bundled_and_held_out():
    names = {split: set(handwriting.FONT_SPLITS[split]) for split in SUBSETS}
    assert len(names["train"]) >= 6 and len(names["val"]) >= 2 and len(names["test"]) >= 2
    more = handwriting.MORE_TRAIN_FONTS
    assert len(more) >= 100 and len(set(more)) == len(more) and not set(more) & names["train"]
    names["train"] |= set(more)
    assert not (names["train"] & names["val"] or names["train"] & names["test"] or names["val"] & names["test"])
    family = lambda name: re.split(r"[-.]|\d", name)[0].lower()  # noqa: E731
    assert not {family(n) for n in names["train"]} & {family(n) for n in names["val"] | names["test"]}
    readme = (handwriting.FONT_DIR / "README.md").read_text()
    for path in ALL_FONTS:
        assert path.is_file() and f"`{path.name}`" in readme
    bundled = {p.name for p in handwriting.FONT_DIR.iterdir() if p.suffix in (".ttf", ".otf", ".woff")}
    assert bundled == {p.name for p in ALL_FONTS}


@pytest.mark.parametrize("path", ALL_FONTS, ids=lambda p: p.name)
def test_every_char_has_a_distinct_glyph(path):
    font = ImageFont.truetype(str(path), 32)
    notdef = glyph(font, "\ue000")  # unassigned code point: drawn as .notdef
    glyphs = {c: glyph(font, c) for c in handwriting.CHARS if c != " "}
    for char, bitmap in glyphs.items():
        assert bitmap.size and bitmap.max() > 128, f"{path.name}: {char!r} draws nothing"
        assert not same(bitmap, notdef), f"{path.name}: {char!r} is missing (.notdef)"
    for lower in string.ascii_lowercase:
        assert not same(glyphs[lower], glyphs[lower.upper()]), f"{path.name}: {lower!r} looks like its capital"


def test_the_all_set_adds_training_fonts_and_keeps_the_held_out_ones():
    for split in ("val", "test"):
        assert handwriting.font_paths(split, "all") == handwriting.font_paths(split, "core") == [
            handwriting.FONT_DIR / name for name in handwriting.FONT_SPLITS[split]]
    core, every = handwriting.font_paths("train", "core"), handwriting.font_paths("train", "all")
    assert every[:len(core)] == core and [p.name for p in every[len(core):]] == handwriting.MORE_TRAIN_FONTS
    with pytest.raises(ValueError, match="train_fonts must be one of"):
        handwriting.font_paths("train", "some")


def test_a_set_of_all_fonts_draws_its_training_lines_from_them_and_its_held_out_lines_alike(tmp_path):
    """Training lines come from the chosen set (the fonts file says which); validation and test
    lines are the very images of the core set's (same random streams, same fonts)."""
    counts = {"train": 40, "val": 3, "test": 3}
    for fonts in ("core", "all"):
        iam_writer.write_iam_layout(tmp_path / fonts, counts, seed=4, progress=False, train_fonts=fonts)
        marker = json.loads((tmp_path / fonts / iam_writer.MARKER).read_text())
        assert marker["train_fonts"] == fonts
        assert marker["fonts"]["train"] == [p.name for p in handwriting.font_paths("train", fonts)]
    drawn = {fonts: iam_writer.read_fonts(tmp_path / fonts) for fonts in ("core", "all")}
    train_ids = [i for i in drawn["all"] if i.startswith(iam_writer.FORM_PREFIX["train"])]
    assert {drawn["all"][i] for i in train_ids} <= set(handwriting.FONT_SPLITS["train"] + handwriting.MORE_TRAIN_FONTS)
    assert {drawn["all"][i] for i in train_ids} & set(handwriting.MORE_TRAIN_FONTS)  # 40 lines: P(none) < 1e-9
    held_out = [i for i in drawn["all"] if not i.startswith(iam_writer.FORM_PREFIX["train"])]
    assert len(held_out) == 6
    for line_id in held_out:
        assert drawn["all"][line_id] == drawn["core"][line_id]
        assert same(load_gray(image_path(tmp_path / "all", "lines", line_id)),
                    load_gray(image_path(tmp_path / "core", "lines", line_id)))


def test_text_splits_are_normalised_and_disjoint():
    texts = {split: handwriting.corpus_text(split) for split in SUBSETS}
    assert 100_000 <= sum(map(len, texts.values())) <= 500_000
    key = lambda sentence: re.sub(r"[^a-z0-9]", "", sentence.lower())  # noqa: E731
    keys = {split: {key(s) for s in text.splitlines()} for split, text in texts.items()}
    for split, text in texts.items():
        assert set(text) <= set(handwriting.CHARS) | {"\n"}
        assert len(text.splitlines()) > (1000 if split == "train" else 100)
    assert not keys["train"] & keys["val"] and not keys["train"] & keys["test"] and not keys["val"] & keys["test"]


def test_sample_texts_lengths_and_words():
    rng = np.random.default_rng(0)
    lines = handwriting.sample_texts("lines", 50, rng, "val", min_chars=20, max_chars=30)
    assert all(20 <= len(line) <= 30 for line in lines) and len(set(lines)) > 45
    assert all(line in " ".join(handwriting.corpus_text("val").split()) for line in lines)
    words = handwriting.sample_texts("words", 50, rng, "test")
    assert all(" " not in w and w[0].isalnum() and w[-1].isalnum() and len(w) <= 16 for w in words)
    with pytest.raises(ValueError, match="min_chars"):
        handwriting.sample_texts("lines", 1, rng, min_chars=30, max_chars=20)
    with pytest.raises(ValueError, match="kind"):
        handwriting.sample_texts("pages", 1, rng)


def test_generate_is_deterministic_per_example():
    first = handwriting.generate(4, seed=7, split="val")
    again = handwriting.generate(2, seed=7, split="val")
    for (image, text), (image2, text2) in zip(first, again):
        assert text == text2 and np.array_equal(image, image2)
    other = handwriting.generate(2, seed=8, split="val")
    assert all(t != t2 for (_, t), (_, t2) in zip(other, first))
    assert handwriting.generate(1, seed=7, split="test")[0][1] != first[0][1]


def test_images_are_gray_ink_on_white_in_the_documented_size():
    examples = [ex for split in SUBSETS for ex in handwriting.generate(12, seed=1, split=split)]
    heights = []
    for image, text in examples:
        assert image.dtype == np.uint8 and image.ndim == 2
        border = np.concatenate([image[0], image[-1], image[:, 0], image[:, -1]])
        assert border.mean() > 200 and image.min() < 110, text
        heights.append(image.shape[0])
        assert image.shape[1] > 4 * len(text)
    assert 20 <= min(heights) and max(heights) <= 120 and 38 <= np.median(heights) <= 62
    words = handwriting.generate(10, seed=1, kind="words")
    assert all(image.shape[0] <= 120 and " " not in text for image, text in words)


def test_render_style_and_text_are_checked():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="slant"):
        handwriting.RenderStyle(slant=(0.5, 0.1))
    with pytest.raises(ValueError, match="CHARS"):
        handwriting.render("naïve", ALL_FONTS[0], rng)
    fixed = handwriting.RenderStyle(font_size=(30, 30), noise=(0, 0), slant=(0, 0), stretch=(1, 1),
                                  stroke_width=(0, 0), blur=(0, 0), margin=(3, 3), paper_gray=(255, 255))
    image = handwriting.render("Hello", ALL_FONTS[0], rng, fixed)
    assert (image[:3] == 255).all() and (image[:, -3:] == 255).all() and image.min() < 100


def ink_centroid(coverage: np.ndarray, left: int, top: int) -> np.ndarray:
    """Coverage-weighted mean ``(x, y)`` of a glyph bitmap's pixel centres, px from the pen
    position on the baseline."""
    rows, cols = np.indices(coverage.shape)
    weights = coverage.astype(np.float64)
    return np.array([((cols + 0.5) * weights).sum(), ((rows + 0.5) * weights).sum()]) / weights.sum() + [left, top]


@pytest.mark.parametrize("stretch, height, rotation", [(1.25, 1.0, 0.0), (0.8, 1.2, 0.0), (1.0, 1.0, 8.0),
                                                       (1.1, 0.85, -6.0)])
def test_a_warped_glyph_moves_its_ink_by_the_closed_form_map(stretch, height, rotation):
    """A blob of ink away from the pen position lands where scale(stretch, height) @ rotate(rotation)
    sends it, keeps its ink (area scales by stretch * height) and stays inside the new bitmap."""
    coverage = np.zeros((40, 30), np.uint8)
    coverage[10:16, 18:24] = 255  # centre (21, 13) in the bitmap
    left, top = 2, -35  # bitmap corner relative to the pen position; the blob's centre is at (23, -22)
    warped, new_left, new_top = handwriting._warp_glyph(coverage, left, top, stretch, height, rotation)
    angle = np.radians(rotation)
    forward = np.diag([stretch, height]) @ np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    expected = forward @ ink_centroid(coverage, left, top)
    np.testing.assert_allclose(ink_centroid(warped, new_left, new_top), expected, atol=0.6)
    assert warped.astype(np.float64).sum() == pytest.approx(coverage.astype(np.float64).sum() * stretch * height, rel=0.08)
    assert warped[0].max() == warped[-1].max() == warped[:, 0].max() == warped[:, -1].max() == 0


def test_per_letter_jitters_follow_the_style_and_are_off_at_zero():
    style = handwriting.RenderStyle(**handwriting.letter_variation(1.0))
    draws = np.array(handwriting._letter_draws(20_000, style, 30.0, np.random.default_rng(0)))
    low, high = handwriting.GLYPH_SCALE_LIMITS
    assert low <= draws[:, :2].min() and draws[:, :2].max() <= high
    assert abs(draws[:, 2]).max() <= handwriting.GLYPH_ROTATION_LIMIT
    np.testing.assert_allclose(draws.std(axis=0), [style.glyph_stretch, style.glyph_height, style.glyph_rotation,
                                                   style.glyph_shift * 30.0], rtol=0.05)
    still = handwriting.RenderStyle()  # the default: no per-letter jitter
    rng = np.random.default_rng(5)
    assert handwriting._letter_draws(7, still, 30.0, rng) == [(1.0, 1.0, 0.0, 0.0)] * 7
    assert rng.random() == np.random.default_rng(5).random()  # nothing drawn
    with pytest.raises(ValueError, match="per-letter"):
        handwriting.RenderStyle(glyph_rotation=-1.0)
    with pytest.raises(ValueError, match="letter variation"):
        handwriting.letter_variation(-0.5)


def test_letters_of_one_line_differ_in_width_with_jitter_and_not_without():
    """The same letter drawn ten times in a line: with the jitters its copies have different
    widths; without them and with every other draw fixed, they are alike."""
    fixed = dict(font_size=(30, 30), noise=(0, 0), slant=(0, 0), stretch=(1, 1), stroke_width=(0, 0), blur=(0, 0),
                 margin=(3, 3), paper_gray=(255, 255), ink_gray=(0, 0), letter_spacing=(0.3, 0.3),
                 baseline_jitter=0.0, size_jitter=0.0)
    widths = {}
    for name, style in (("still", handwriting.RenderStyle(**fixed)),
                        ("jittered", handwriting.RenderStyle(**fixed, **handwriting.letter_variation(1.0)))):
        image = handwriting.render("llllllllll", ALL_FONTS[0], np.random.default_rng(1), style)
        inked = (image < 128).any(axis=0).astype(int)
        starts, ends = np.flatnonzero(np.diff(inked) == 1), np.flatnonzero(np.diff(inked) == -1)
        assert len(starts) == len(ends) == 10
        widths[name] = ends - starts
    assert np.ptp(widths["still"]) <= 1 and np.ptp(widths["jittered"]) >= 2


def parse_rows(path):
    """``ascii/*.txt`` rows as field lists, IAM style: ``#`` comments, space-separated fields."""
    return [line.split(" ") for line in path.read_text().splitlines() if not line.startswith("#")]


def image_path(root, folder, item_id):
    parts = item_id.split("-")
    return root / folder / parts[0] / f"{parts[0]}-{parts[1]}" / f"{item_id}.png"


def test_write_iam_layout_lines_and_words(tmp_path):
    counts = {"train": 12, "val": 3, "test": 2}
    summary = iam_writer.write_iam_layout(tmp_path, counts, kind="both", seed=4, progress=False)
    lines = parse_rows(tmp_path / "ascii" / "lines.txt")
    words = parse_rows(tmp_path / "ascii" / "words.txt")
    task = tmp_path / "largeWriterIndependentTextLineRecognitionTask"
    splits = {name: (task / f"{name}.txt").read_text().split()
              for name in ("trainset", "validationset1", "testset")}
    assert [len(splits[n]) for n in ("trainset", "validationset1", "testset")] == [12, 3, 2]
    assert {i[0] for i in splits["trainset"]} == {"s"} and {i[0] for i in splits["testset"]} == {"t"}
    assert sorted(row[0] for row in lines) == sorted(sum(splits.values(), []))

    expected = {}
    for split, name in (("train", "trainset"), ("val", "validationset1"), ("test", "testset")):
        for line_id, (image, text) in zip(splits[name], handwriting.generate(counts[split], seed=4, split=split)):
            expected[line_id] = (image, text)
    for line_id, result, gray, _, x, y, w, h, *transcription in lines:
        image, text = expected[line_id]
        assert result == "ok" and 0 < int(gray) < 255 and " ".join(transcription).replace("|", " ") == text
        stored = load_gray(image_path(tmp_path, "lines", line_id))
        assert stored.shape == (int(h), int(w)) and np.array_equal(stored, image)
        line_words = [row for row in words if row[0].rsplit("-", 1)[0] == line_id]
        assert [row[8] for row in line_words] == text.split()
        for word_id, _, _, wx, wy, ww, wh, _, _ in line_words:
            x0, y0, x1, y1 = int(wx), int(wy) - int(y), int(wx) + int(ww), int(wy) - int(y) + int(wh)
            assert 0 <= x0 < x1 <= int(w) and 0 <= y0 < y1 <= int(h)
            assert np.array_equal(load_gray(image_path(tmp_path, "words", word_id)), stored[y0:y1, x0:x1])
    val_words = sum(len(expected[i][1].split()) for i in splits["validationset1"])
    assert summary["counts"]["val"] == {"lines": 3, "words": val_words}


def test_the_fonts_file_names_the_font_each_image_was_drawn_with(tmp_path):
    """Each line's recorded font is the only one of its split whose drawing, from the line's random
    stream, gives the stored image; its words carry the line's font."""
    counts = {"train": 4, "val": 4, "test": 2}
    iam_writer.write_iam_layout(tmp_path, counts, kind="both", seed=2, progress=False)
    fonts = iam_writer.read_fonts(tmp_path)
    lines = parse_rows(tmp_path / "ascii" / "lines.txt")
    words = parse_rows(tmp_path / "ascii" / "words.txt")
    assert set(fonts) == {row[0] for row in lines} | {row[0] for row in words}
    for split in SUBSETS:
        split_lines = [row for row in lines if row[0][0] == iam_writer.FORM_PREFIX[split]]
        assert len(split_lines) == counts[split]
        for index, (line_id, *_, transcription) in enumerate(split_lines):
            stored = load_gray(image_path(tmp_path, "lines", line_id))
            drawn_alike = []
            for path in handwriting.font_paths(split):
                rng = np.random.default_rng([2, SUBSETS.index(split), 0, index])  # kind "lines"
                text = handwriting.sample_texts("lines", 1, rng, split)[0]
                rng.integers(len(handwriting.font_paths(split)))
                assert text.split() == transcription.split("|")
                if same(handwriting.render(text, path, rng), stored):
                    drawn_alike.append(path.name)
            assert drawn_alike == [fonts[line_id]]
            assert all(fonts[row[0]] == fonts[line_id] for row in words if row[0].startswith(line_id + "-"))
    assert iam_writer.read_fonts(tmp_path / "ascii") == {}


def test_worker_processes_write_the_same_set(tmp_path):
    """Rendered in 2 worker processes (several chunks each), the set is the one rendered here, file
    for file and byte for byte."""
    counts = {"train": 75, "val": 5, "test": 3}
    for processes in (1, 2):
        iam_writer.write_iam_layout(tmp_path / str(processes), counts, kind="both", seed=3, progress=False,
                                   processes=processes)
    files = {n: sorted(p.relative_to(tmp_path / n) for p in (tmp_path / n).rglob("*") if p.is_file()) for n in "12"}
    assert files["1"] == files["2"] and len(files["1"]) > 83
    changed = [path for path in files["1"] if path.name != iam_writer.MARKER
               and (tmp_path / "1" / path).read_bytes() != (tmp_path / "2" / path).read_bytes()]
    assert not changed


def test_write_iam_layout_words(tmp_path):
    iam_writer.write_iam_layout(tmp_path, {"train": 13, "test": 1}, kind="words", progress=False)
    assert not (tmp_path / "ascii" / "lines.txt").exists()
    words = parse_rows(tmp_path / "ascii" / "words.txt")
    texts = [text for _, text in handwriting.generate(13, kind="words")]
    assert [row[8] for row in words[:13]] == texts
    for word_id, _, _, _, _, w, h, tag, _ in words:
        assert load_gray(image_path(tmp_path, "words", word_id)).shape == (int(h), int(w))
    train_ids = (tmp_path / "largeWriterIndependentTextLineRecognitionTask" / "trainset.txt").read_text().split()
    assert train_ids == ["s00-0000-00", "s00-0000-01"]


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="tfnhr")
    synth.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["synth", *argv])
    return args.run(args)


def test_cli_writes_a_set_and_refuses_a_foreign_folder(tmp_path, capsys):
    out = tmp_path / "set"
    assert run_cli("--out", str(out), "--train", "3", "--val", "1", "--test", "1", "--quiet") == 0
    assert '"images": 5' in capsys.readouterr().out
    assert run_cli("--out", str(out), "--train", "2", "--val", "0", "--test", "0", "--font-size", "20", "24") == 0
    assert len(parse_rows(out / "ascii" / "lines.txt")) == 2 and not (out / "lines" / "v00").exists()

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert run_cli("--out", str(foreign), "--train", "1") == 2
    assert "not empty" in capsys.readouterr().err
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    assert run_cli("--out", str(tmp_path / "bad"), "--min-chars", "30", "--max-chars", "10") == 2
    assert not (tmp_path / "bad").exists()


def test_cli_letter_variation_renders_with_the_scaled_jitters(tmp_path):
    out = tmp_path / "varied"
    assert run_cli("--out", str(out), "--train", "2", "--val", "0", "--test", "0", "--quiet",
                   "--letter-variation", "0.5") == 0
    recorded = json.loads((out / iam_writer.MARKER).read_text())["style"]
    assert {name: recorded[name] for name in handwriting.GLYPH_JITTERS} == handwriting.letter_variation(0.5)
    style = handwriting.RenderStyle(**handwriting.letter_variation(0.5))
    line_id = parse_rows(out / "ascii" / "lines.txt")[0][0]
    expected = handwriting.render_example(0, "lines", "train", 0, style).image
    assert np.array_equal(load_gray(image_path(out, "lines", line_id)), expected)
    assert not np.array_equal(handwriting.render_example(0, "lines", "train", 0).image, expected)


def test_cli_train_fonts_reach_the_set_and_a_page_layout_refuses_them(tmp_path, capsys):
    out = tmp_path / "all"
    assert run_cli("--out", str(out), "--train", "2", "--val", "0", "--test", "0", "--quiet", "--train-fonts", "all") == 0
    assert json.loads((out / iam_writer.MARKER).read_text())["train_fonts"] == "all"
    line_id = parse_rows(out / "ascii" / "lines.txt")[1][0]
    expected = handwriting.render_example(0, "lines", "train", 1, train_fonts="all").image
    assert np.array_equal(load_gray(image_path(out, "lines", line_id)), expected)
    capsys.readouterr()
    assert run_cli("--out", str(tmp_path / "pages"), "--layout", "page", "--train-fonts", "all") == 2
    assert "--train-fonts" in capsys.readouterr().err and not (tmp_path / "pages").exists()


def test_one_length_bound_moves_the_other_default_out_of_its_way():
    rng = np.random.default_rng(0)
    short = handwriting.sample_texts("lines", 30, rng, max_chars=8)  # below the default minimum of 12
    assert all(1 <= len(text) <= 8 for text in short)
    long = handwriting.sample_texts("lines", 30, rng, min_chars=45)  # above the default maximum of 40
    assert all(len(text) >= 45 for text in long)
    with pytest.raises(OptionError, match=r"^need 1 <= min_chars <= max_chars, got 9, 8$"):
        handwriting.sample_texts("lines", 3, rng, min_chars=9, max_chars=8)
