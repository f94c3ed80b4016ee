"""Synthetic handwriting sets written in the IAM folder layout, so that the IAM reader
(:mod:`tfnhr.data.formats.iam`) reads them unchanged: images rendered by
:mod:`tfnhr.data.synthetic.handwriting`, ``ascii/*.txt`` rows, the split files, a font per image
(:data:`FONTS_FILE`) and the set's parameters (:data:`MARKER`)."""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from tfnhr.config.choices import KINDS, SUBSETS
from tfnhr.data.formats.iam import OFFICIAL_SPLIT_DIR, OFFICIAL_SPLIT_FILES, OFFICIAL_VALIDATION2
from tfnhr.data.synthetic import handwriting
from tfnhr.runtime.parallel import ordered_map
from tfnhr.runtime.progress import Progress


MARKER = "synthetic.json"
"""File at the root of a set written by :func:`write_iam_layout` (its parameters and summary)."""
FONTS_FILE = "fonts.tsv"
"""File at the root of a set written by :func:`write_iam_layout`: each image's id and the font
file it was drawn with, tab-separated (:func:`read_fonts`)."""

FORM_PREFIX = {"train": "s", "val": "v", "test": "t"}
"""First letter of the form ids of each split (IAM's writer-group letter)."""
LINES_PER_FORM = 10
WORDS_PER_LINE = 10
"""For kind "words": how many word images share one (not written) line id."""
WORD_TAG = "X"
"""The grammatical-tag field of ``words.txt`` rows (the synthetic texts have no tags)."""


def _header(name: str, example: str, fields: Sequence[str]) -> str:
    """An IAM-style ``#`` comment header of an ``ascii/*.txt`` file."""
    lines = [f"--- {name} (synthetic handwriting, written by tfnhr.data.synthetic.iam_writer) ---", "",
             f"format: {example}", "", *(f"    {field}" for field in fields), ""]
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


_COMMON_FIELDS = ("ok             -> segmentation result (always ok)",
                  "graylevel      -> gray level that separates ink from paper in this image")
_LINE_HEADER = _header("lines.txt", "s00-0000-00 ok 128 7 0 0 412 48 This|is|a|line.", (
    "s00-0000-00    -> line 00 of form s00-0000 (s: train, v: validation, t: test fonts)", *_COMMON_FIELDS,
    "components     -> number of words",
    "x y w h        -> bounding box, x/y on a virtual form page (its lines stacked)",
    "transcription  -> the text, | for each space"))
_WORD_HEADER = _header("words.txt", f"s00-0000-00-00 ok 128 0 0 61 48 {WORD_TAG} This", (
    "s00-0000-00-00 -> word 00 of line s00-0000-00", *_COMMON_FIELDS,
    "x y w h        -> bounding box, x/y on the virtual form page (0 0 for single words)",
    f"{WORD_TAG:<14} -> grammatical tag (none)",
    "transcription  -> the word"))


def _line_id(split: str, line: int) -> str:
    form = line // LINES_PER_FORM
    return f"{FORM_PREFIX[split]}{form // 10000:02d}-{form % 10000:04d}-{line % LINES_PER_FORM:02d}"


def _image_path(root: Path, folder: str, item_id: str) -> Path:
    """IAM image path: ``root/folder/s00/s00-0000/<item_id>.png``."""
    parts = item_id.split("-")
    return root / folder / parts[0] / f"{parts[0]}-{parts[1]}" / f"{item_id}.png"


def _threshold(image: np.ndarray) -> int:
    """Midpoint between the darkest and the median (paper) gray level (of every other pixel)."""
    return int((int(image.min()) + int(np.median(image[::2, ::2]))) // 2)


def _prepare(out: Path) -> None:
    """Make ``out`` ready: new, empty, or a synthetic set (whose written parts are removed)."""
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a folder")
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise FileExistsError(f"{out} is not empty and holds no synthetic set ({MARKER} missing); "
                                  "choose an empty or new folder")
        for name in ("ascii", "lines", "words", OFFICIAL_SPLIT_DIR, MARKER, FONTS_FILE):
            target = out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    out.mkdir(parents=True, exist_ok=True)


class _IamWriter:
    """Writes images as they come and collects the ``ascii/*.txt`` rows and split ids, written by
    :meth:`finish`."""

    def __init__(self, out: Path) -> None:
        self.out, self.pixels, self.folders = out, 0, set()
        self.rows: dict[str, list[str]] = {"lines": [], "words": []}
        self.ids: dict[str, list[str]] = {split: [] for split in SUBSETS}
        self.counts = {split: {"lines": 0, "words": 0} for split in SUBSETS}
        self.fonts: list[tuple[str, str]] = []

    def font(self, item_id: str, font: str) -> None:
        """Note that image ``item_id`` was drawn with ``font``."""
        self.fonts.append((item_id, font))

    def _add(self, folder: str, split: str, item_id: str, image: np.ndarray, row: str) -> None:
        path = _image_path(self.out, folder, item_id)
        if path.parent not in self.folders:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.folders.add(path.parent)
        Image.fromarray(image).save(path, compress_level=1)
        self.pixels += image.size
        self.rows[folder].append(f"{item_id} ok {_threshold(image)} {row}")
        self.counts[split][folder] += 1
        line_id = item_id if folder == "lines" else item_id.rsplit("-", 1)[0]
        if not self.ids[split] or self.ids[split][-1] != line_id:
            self.ids[split].append(line_id)

    def line(self, split: str, line_id: str, image: np.ndarray, text: str, y: int) -> None:
        """Line ``image`` at ``(0, y)`` on its form."""
        words = text.split()
        height, width = image.shape
        self._add("lines", split, line_id, image, f"{len(words)} 0 {y} {width} {height} {'|'.join(words)}")

    def word(self, split: str, word_id: str, image: np.ndarray, word: str, x: int, y: int) -> None:
        """Word ``image`` at ``(x, y)`` on its form."""
        self._add("words", split, word_id, image, f"{x} {y} {image.shape[1]} {image.shape[0]} {WORD_TAG} {word}")

    def finish(self) -> None:
        """Write the text files."""
        (self.out / "ascii").mkdir(exist_ok=True)
        for name, header in (("lines", _LINE_HEADER), ("words", _WORD_HEADER)):
            if self.rows[name]:
                text = header + "".join(f"{row}\n" for row in self.rows[name])
                (self.out / "ascii" / f"{name}.txt").write_text(text)
        (self.out / FONTS_FILE).write_text("".join(f"{item_id}\t{font}\n" for item_id, font in self.fonts))
        (self.out / OFFICIAL_SPLIT_DIR).mkdir(exist_ok=True)
        for split, name in (*OFFICIAL_SPLIT_FILES.items(), (None, OFFICIAL_VALIDATION2)):
            (self.out / OFFICIAL_SPLIT_DIR / name).write_text("".join(f"{i}\n" for i in self.ids.get(split, [])))


def read_fonts(set_dir: str | Path) -> dict[str, str]:
    """Image id -> font file name of a set written by :func:`write_iam_layout`; ``{}`` for a
    folder without :data:`FONTS_FILE` (not synthetic, or a synthetic set written without it)."""
    path = Path(set_dir) / FONTS_FILE
    if not path.is_file():
        return {}
    return dict(line.split("\t", 1) for line in path.read_text().splitlines() if line)


def write_iam_layout(out_dir: str | Path, counts: Mapping[str, int], kind: str = "lines", seed: int = 0,
                     style: handwriting.RenderStyle = handwriting.RenderStyle(), progress: bool = True,
                     min_chars: int | None = None, max_chars: int | None = None,
                     train_fonts: str = "core", processes: int = 1) -> dict:
    """Write a synthetic set in the IAM folder layout and return a summary.

    ``counts``: examples per split, e.g. ``{"train": 2000, "val": 200, "test": 200}`` (lines, or
    words for kind "words"). ``kind``: "lines" (``ascii/lines.txt``, ``lines/...png``), "words"
    (``ascii/words.txt``, ``words/...png``; ten words share a line id) or "both" (lines, plus every
    word of each line cropped from the line image). Split files in
    ``largeWriterIndependentTextLineRecognitionTask/`` list the line ids of each split
    (``validationset2.txt`` is written empty). ``out_dir`` must be new, empty or an earlier
    synthetic set (which is replaced); anything else raises ``FileExistsError``. ``min_chars``,
    ``max_chars``: text lengths as in :func:`~tfnhr.data.synthetic.handwriting.sample_texts` (of lines for kind "both").
    ``train_fonts``: the training-font set (:func:`~tfnhr.data.synthetic.handwriting.font_paths`; the held-out fonts are the same).
    ``processes``: render in this many worker processes (:func:`tfnhr.runtime.parallel.ordered_map`; the
    same images, as each depends only on its index); the images are written by this process.

    Returns ``{"out_dir", "kind", "seed", "counts": {split: {"lines": n, "words": n}},
    "images", "pixels", "seconds", "images_per_second"}`` (images and pixels of all files).
    """
    handwriting.check_args(seed, kind, "train", kinds=(*KINDS, "both"))
    if set(counts) - set(SUBSETS) or any(n < 0 for n in counts.values()):
        raise ValueError(f"counts must map splits {SUBSETS} to numbers >= 0, got {dict(counts)}")
    text_kind = "words" if kind == "words" else "lines"
    handwriting.sample_texts(text_kind, 1, np.random.default_rng(seed), "train", min_chars, max_chars)  # raises on bad lengths
    fonts = {split: [path.name for path in handwriting.font_paths(split, train_fonts)] for split in SUBSETS}
    out = Path(out_dir)
    _prepare(out)
    params = {"kind": kind, "seed": seed, "counts": dict(counts), "min_chars": min_chars, "max_chars": max_chars,
              "style": dataclasses.asdict(style), "train_fonts": train_fonts, "fonts": fonts}
    (out / MARKER).write_text(json.dumps(params, indent=1) + "\n")

    writer, bar = _IamWriter(out), Progress(sum(counts.values()), "synth", unit="examples", enabled=progress)
    items = [(split, index) for split, count in counts.items() for index in range(count)]
    render = functools.partial(handwriting.render_item, seed, text_kind, style, (min_chars, max_chars), train_fonts)
    form_y = 0
    for (split, index), (image, text, boxes, font) in zip(items, ordered_map(render, items, processes)):
        if kind == "words":
            line_id = _line_id(split, index // WORDS_PER_LINE)
            writer.word(split, f"{line_id}-{index % WORDS_PER_LINE:02d}", image, text, 0, 0)
            writer.font(f"{line_id}-{index % WORDS_PER_LINE:02d}", font)
        else:
            line_id = _line_id(split, index)
            form_y = 0 if index % LINES_PER_FORM == 0 else form_y
            writer.line(split, line_id, image, text, form_y)
            writer.font(line_id, font)
            if kind == "both":
                for number, (word, (x0, y0, x1, y1)) in enumerate(zip(text.split(), boxes)):
                    writer.word(split, f"{line_id}-{number:02d}", image[y0:y1, x0:x1], word, x0, form_y + y0)
                    writer.font(f"{line_id}-{number:02d}", font)
            form_y += image.shape[0]
        bar.step()
    writer.finish()

    seconds = time.perf_counter() - bar.started
    images = sum(sum(c.values()) for c in writer.counts.values())
    summary = {"out_dir": str(out), "kind": kind, "seed": seed, "counts": writer.counts, "images": images,
               "pixels": writer.pixels, "seconds": round(seconds, 3),
               "images_per_second": round(images / max(seconds, 1e-9), 1)}
    (out / MARKER).write_text(json.dumps({**params, "summary": summary}, indent=1) + "\n")
    return summary
