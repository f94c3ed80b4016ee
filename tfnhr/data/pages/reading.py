"""Pages as training and evaluation data: a folder of page images with PAGE-XML or ALTO files
(e.g. a Transkribus, eScriptorium or OCR-D export) -> text-line images with their transcriptions.

Layout files are found anywhere under the folder (``*.xml``, recursively; METS files and
Transkribus' ``metadata.xml`` are passed over, other XML is counted and ignored). Each file's page image is looked up, as
the file names it, next to the file, in its parent folder (Transkribus puts the XML in
``page/``), and at the folder's root; then by the file's own stem with an image suffix. Lines are
cut with :func:`tfnhr.data.pages.line_cutting.cut_line`; coordinates are scaled from the size the file
declares to the image's size.

Every page is one unit of the split, so no page gives lines to two subsets. ``split``:

* ``"official"`` (the default): subfolders ``train/``, ``valid/`` (or ``val``, ``validation``,
  ``cv``) and ``test/`` of the folder when it has them, else ``"seeded:0"``;
* ``"seeded"`` or ``"seeded:SEED"``: pages shuffled with ``SEED``, 80/10/10 % (at least one page
  each) for train/val/test;
* a folder of ``train``/``valid``/``test`` lists of page ids (file names without suffix), as for
  IAM (:func:`tfnhr.data.formats.iam.read_split_ids`).

Nothing is dropped silently: lines without text, empty/degenerate polygons and polygons outside
their image, pages whose image is missing or unreadable, layout files that are not well-formed
or lack their page image/size, and other XML files are each counted in one
:class:`SkippedPageDataWarning` per kind.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from tfnhr.config.choices import SUBSETS
from tfnhr.config.options import OptionError
from tfnhr.data.formats.iam import SPLIT_FOLDER_NAMES, read_split_ids
from tfnhr.data.images import ImageReadError, load_gray, scale_to_height
from tfnhr.data.pages.line_cutting import LineCut, LineCutError, cut_line
from tfnhr.data.pages.layout import (InvalidLayoutError, LayoutLine, NotLayoutError, PageLayout,
                                     layout_format, read_layout)
from tfnhr.data.samples import TextImageSet
from tfnhr.runtime.progress import Progress

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp", ".jp2")
"""Suffixes tried when a page image is looked up by the layout file's stem."""
EXPORT_COMPANIONS = frozenset({"mets", "trpDocMetadata"})
"""Root elements of the XML files that exports put beside their layout files (METS of OCR-D and
eScriptorium, Transkribus' ``metadata.xml``): passed over without a warning."""
SEEDED_FRACTIONS = (0.8, 0.1, 0.1)
"""Shares of the pages in train, val and test for a seeded split."""

SKIP_KINDS = {
    "no_text": "lines without text",
    "degenerate": "lines with an empty or degenerate polygon",
    "outside": "lines whose polygon lies outside the page image",
    "missing_image": "pages whose image is missing",
    "unreadable_image": "pages whose image is unreadable",
    "invalid_layout": "layout files that are not well-formed or lack the page image or size",
    "not_layout": "XML files that are neither PAGE-XML nor ALTO (ignored)",
}
"""What is skipped and counted, by kind (each kind: one warning)."""
PAGE_SKIPS = ("missing_image", "unreadable_image", "invalid_layout")
"""The kinds of :data:`SKIP_KINDS` that leave a whole page out."""


class SkippedPageDataWarning(UserWarning):
    """Lines, pages or files of a pages folder were left out (the message counts them)."""


@dataclasses.dataclass
class Skips:
    """Skipped items by kind (:data:`SKIP_KINDS`): each a list of ``"where: why"`` strings."""

    items: dict[str, list[str]] = dataclasses.field(default_factory=lambda: collections.defaultdict(list))

    def add(self, kind: str, item: str) -> None:
        self.items[kind].append(item)

    def count(self, kind: str) -> int:
        return len(self.items.get(kind, ()))

    def warn(self, what: str, stacklevel: int = 2) -> None:
        """One :class:`SkippedPageDataWarning` per kind with skips, naming the first two."""
        for kind, label in SKIP_KINDS.items():
            found = self.items.get(kind)
            if found:
                examples = "; ".join(found[:2]) + ("; ..." if len(found) > 2 else "")
                warnings.warn(f"{what}: skipped {len(found)} {label} (first: {examples})",
                              SkippedPageDataWarning, stacklevel=stacklevel + 1)


def find_layout_files(source: str | Path | Sequence[str | Path], skips: Skips) -> list[Path]:
    """The PAGE-XML/ALTO files of ``source``, sorted by path.

    ``source``: a folder (searched recursively for ``*.xml``; other XML is counted in ``skips``
    as ``not_layout``; damaged XML is kept, for :func:`read_pages` to count) or a list of layout files (each must be
    PAGE-XML or ALTO: :class:`~tfnhr.data.pages.layout.NotLayoutError` otherwise). Raises
    ``FileNotFoundError`` for a missing path and ``ValueError`` when a folder holds no layout file.
    """
    if isinstance(source, (str, Path)) and Path(source).is_dir():
        folder = Path(source)
        found = []
        for path in sorted(p for p in folder.rglob("*.xml") if not any(part.startswith(".") for part in p.parts)):
            try:
                layout_format(path)
            except NotLayoutError as error:
                if error.root not in EXPORT_COMPANIONS:
                    skips.add("not_layout", f"{path.relative_to(folder)} (root {error.root or 'not XML'})")
            except InvalidLayoutError:
                found.append(path)  # damaged: counted when it is read (read_pages), if in the subset
            else:
                found.append(path)
        if not found:
            raise ValueError(f"{folder} holds no PAGE-XML or ALTO file (*.xml, searched recursively)")
        return _unique_ids(found)
    paths = [Path(source)] if isinstance(source, (str, Path)) else [Path(path) for path in source]
    for path in paths:
        if path.is_dir():
            raise ValueError(f"{path} is a folder: give one folder, or layout files")
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such layout file or folder")
        layout_format(path)  # NotLayoutError names a file that is neither PAGE nor ALTO
    return _unique_ids(sorted(paths))


def _unique_ids(paths: list[Path]) -> list[Path]:
    seen: dict[str, Path] = {}
    for path in paths:
        if path.stem in seen:
            raise ValueError(f"two layout files have the page id {path.stem!r}: {seen[path.stem]} and {path} "
                             "(page ids are file names without suffix; rename one)")
        seen[path.stem] = path
    return paths


def find_page_image(layout: PageLayout, root: Path | None = None) -> Path | None:
    """The page image of ``layout`` (see the module docstring), or ``None`` if none exists."""
    named = Path(layout.image_name.replace("\\", "/"))
    folders = [layout.path.parent, layout.path.parent.parent] + ([root] if root is not None else [])
    candidates = [folder / named for folder in folders] + [folder / named.name for folder in folders]
    candidates += [folder / (layout.path.stem + suffix) for folder in folders[:2] for suffix in IMAGE_SUFFIXES]
    if named.is_absolute():
        candidates.insert(0, named)
    return next((path for path in candidates if path.is_file()), None)


def split_page_ids(folder: Path, paths: Sequence[Path], split: str | Path) -> dict[str, set[str]]:
    """Page ids per subset (:data:`~tfnhr.config.choices.SUBSETS`) of the layout files ``paths`` under
    ``folder`` for ``split`` (see the module docstring)."""
    ids = [path.stem for path in paths]
    text = str(split)
    if text == "official":
        by_folder = _split_by_subfolder(folder, paths)
        if by_folder is not None:
            return by_folder
        text = "seeded:0"
    match = re.fullmatch(r"seeded(?::(\d+))?", text)
    if match:
        return seeded_split(ids, int(match.group(1) or 0))
    return read_split_ids(folder, split)


def _split_by_subfolder(folder: Path, paths: Sequence[Path]) -> dict[str, set[str]] | None:
    """Subsets from the first folder level (``train/``, ``valid/``, ``test/``), when every
    subset has such a folder; ``None`` otherwise."""
    names = {name: subset for subset, options in SPLIT_FOLDER_NAMES.items() for name in options}
    present = {names[child.name] for child in folder.iterdir() if child.is_dir() and child.name in names}
    if present != set(SUBSETS):
        return None
    split: dict[str, set[str]] = {subset: set() for subset in SUBSETS}
    for path in paths:
        first = path.relative_to(folder).parts[0]
        if first in names:
            split[names[first]].add(path.stem)
    return split


def seeded_split(page_ids: Sequence[str], seed: int) -> dict[str, set[str]]:
    """Pages shuffled with ``seed`` and cut :data:`SEEDED_FRACTIONS` (each subset gets at least
    one page); :class:`~tfnhr.config.options.OptionError` for fewer than 3 pages."""
    if len(page_ids) < len(SUBSETS):
        raise OptionError("a seeded split by page needs at least {needed} pages, got {got}; give {split} a folder "
                          "with train/valid/test page-id lists", needed=len(SUBSETS),
                          got=len(page_ids), split=("split", "--split"))
    order = np.random.default_rng(seed).permutation(sorted(page_ids)).tolist()
    count = len(order)
    val = max(1, round(count * SEEDED_FRACTIONS[1]))
    test = max(1, round(count * SEEDED_FRACTIONS[2]))
    train = count - val - test
    return {"train": set(order[:train]), "val": set(order[train:train + val]), "test": set(order[train + val:])}


def page_line_cuts(layout: PageLayout, page: np.ndarray, deskew: bool, skips: Skips,
                   need_text: bool = True) -> Iterator[tuple[LayoutLine, LineCut]]:
    """``(line, its cut)`` for each usable line of ``layout`` on its gray ``page`` (coordinates
    scaled from the declared size to the image; ``LineCut.to_page`` maps to image pixels);
    skipped lines go to ``skips``. ``need_text``: skip lines without a transcription."""
    scale_x, scale_y = file_scale(layout, page.shape)
    for line in layout.lines:
        where = f"{layout.path.name} line {line.id}"
        if need_text and not line.text:
            skips.add("no_text", where)
            continue
        polygon = [(x * scale_x, y * scale_y) for x, y in line.polygon]
        baseline = [(x * scale_x, y * scale_y) for x, y in line.baseline]
        try:
            yield line, cut_line(page, polygon, baseline, deskew=deskew)
        except LineCutError as error:
            skips.add(error.reason, f"{where}: {error}")


def file_scale(layout: PageLayout, shape: tuple[int, int]) -> tuple[float, float]:
    """Image pixels per file unit ``(x, y)`` for a page image of ``shape`` ``[H, W]``: the image
    size over the size the file declares (1 when it declares none)."""
    if layout.size is None:
        return 1.0, 1.0
    return shape[1] / layout.size[0], shape[0] / layout.size[1]


def read_pages(paths: Sequence[Path], skips: Skips, root: Path | None = None,
               progress: bool = False, what: str = "pages") -> Iterator[tuple[PageLayout, np.ndarray]]:
    """``(layout, gray page)`` for each readable layout file with a readable image, in order;
    the others go to ``skips`` (``invalid_layout``, ``missing_image``, ``unreadable_image``)."""
    bar = Progress(len(paths), f"reading {what}", enabled=progress)
    for number, path in enumerate(paths, start=1):
        bar.update(number - 1)
        try:
            layout = read_layout(path)
        except InvalidLayoutError as error:
            skips.add("invalid_layout", str(error))
            continue
        image = find_page_image(layout, root)
        if image is None:
            skips.add("missing_image", f"{path.name}: {layout.image_name}")
            continue
        try:
            gray = load_gray(image)
        except ImageReadError as error:
            skips.add("unreadable_image", str(error))
            continue
        yield layout, gray
    bar.update(len(paths))


def page_examples(folder: str | Path, subset: str | None, split: str | Path = "official",
                  height: int | None = None, deskew: bool = True, progress: bool = False,
                  skips: Skips | None = None) -> Iterator[tuple[str, str, np.ndarray]]:
    """``(line id, text, uint8 [H, W] image scaled to height)`` for each usable line of the pages
    of ``subset`` (``None``: all pages) of the pages ``folder``, page by page in id order and in
    reading order within a page. Line ids are ``PAGE_ID/LINE_ID``.

    Skips are collected in ``skips`` when given (the caller warns); otherwise one
    :class:`SkippedPageDataWarning` per kind is issued at the end. ``ValueError`` at the end if
    no line was usable.
    """
    own = skips is None
    skips = Skips() if own else skips
    folder = Path(folder)
    paths = find_layout_files(folder, skips)
    what = "pages" if subset is None else f"{subset} pages"
    if subset is not None:
        if subset not in SUBSETS:
            raise ValueError(f"subset must be None or one of {SUBSETS}, got {subset!r}")
        chosen = split_page_ids(folder, paths, split)[subset]
        paths = [path for path in paths if path.stem in chosen]
        if not paths:
            raise ValueError(f"{folder}: the {subset} subset has no page (split {split!s})")
    lines = 0
    for layout, page in read_pages(paths, skips, folder, progress, what):
        for line, cut in page_line_cuts(layout, page, deskew, skips):
            lines += 1
            yield f"{layout.id}/{line.id}", line.text, scale_to_height(cut.image, height)
    if own:
        skips.warn(f"{folder} ({what})", stacklevel=2)
    if not lines:
        raise ValueError(f"{folder} ({what}): no usable text line in {len(paths)} layout files")


def load_page_subset(folder: str | Path, subset: str | None, split: str | Path = "official",
                     height: int | None = None, limit: int | None = None, deskew: bool = True,
                     progress: bool = False) -> TextImageSet:
    """The first ``limit`` (``None``: all) lines of :func:`page_examples` in memory."""
    skips = Skips()
    images, texts, ids = [], [], []
    examples = page_examples(folder, subset, split, height, deskew, progress, skips)
    for line_id, text, image in examples:
        if limit is not None and len(images) >= limit:
            examples.close()
            break
        images.append(image)
        texts.append(text)
        ids.append(line_id)
    skips.warn(f"{folder} ({subset or 'all'} pages)")
    return TextImageSet(images, texts, ids)


def is_pages_folder(folder: str | Path) -> bool:
    """Whether ``folder`` is a pages folder rather than IAM layout: it has no ``ascii/`` folder
    and holds at least one PAGE-XML or ALTO file."""
    folder = Path(folder)
    if not folder.is_dir() or (folder / "ascii").is_dir():
        return False
    for path in folder.rglob("*.xml"):
        try:
            layout_format(path)
        except (NotLayoutError, InvalidLayoutError, FileNotFoundError):
            continue
        return True
    return False
