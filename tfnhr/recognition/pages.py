"""Recognizing the text lines of pages and writing the text back into their PAGE-XML/ALTO files
(``tfnhr recognize --pages``, the service's ``POST /recognize/page``).

The lines must already be segmented (a layout tool such as kraken or OCR-D makes them): every
``TextLine`` with a usable polygon is cut from the page image (:mod:`tfnhr.data.pages.reading`), read
by a ``read`` function (e.g. :meth:`tfnhr.recognition.transcriber.Transcriber.read`) and written back with
:mod:`tfnhr.data.pages.writing`: the line's text and confidence, and its words with their
positions when the decoder's text is the best path's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from tfnhr.recognition.alignment import Reading
from tfnhr.data.images import unreadable_reason
from tfnhr.data.pages.line_cutting import LineCut
from tfnhr.data.pages.layout import LayoutLine, PageLayout
from tfnhr.data.pages.writing import WordBox, fill_line, save_layout, word_polygon
from tfnhr.data.pages.reading import Skips, file_scale, find_layout_files, page_line_cuts, read_pages

ReadLines = Callable[[Sequence[np.ndarray]], Sequence[Reading]]
"""uint8 gray line images -> one :class:`~tfnhr.recognition.alignment.Reading` each, spans in the images' columns."""


@dataclasses.dataclass
class PagesSummary:
    """What :func:`recognize_pages` did: files written, lines and words recognized, time (s)."""

    pages: int = 0
    lines: int = 0
    words: int = 0
    seconds: float = 0.0
    written: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict:
        rate = lambda count: round(count / self.seconds, 2) if self.seconds > 0 else None  # noqa: E731
        return {"pages": self.pages, "lines": self.lines, "words": self.words, "seconds": round(self.seconds, 2),
                "pages_per_second": rate(self.pages), "lines_per_second": rate(self.lines), "written": self.written}


def fill_page(layout: PageLayout, page: np.ndarray, read: ReadLines, skips: Skips, deskew: bool = True) -> tuple[int, int]:
    """Recognize every usable line of ``layout`` on its gray ``page`` and write the results into
    ``layout.tree``; returns ``(lines, words)`` written. Lines that cannot be cut or are too small
    to read are left as they are and counted in ``skips``."""
    cuts: list[tuple[LayoutLine, LineCut]] = []
    for line, cut in page_line_cuts(layout, page, deskew, skips, need_text=False):
        reason = unreadable_reason(cut.image)
        if reason is None:
            cuts.append((line, cut))
        else:
            skips.add("degenerate", f"{layout.path.name} line {line.id}: {reason}")
    readings = read([cut.image for _, cut in cuts]) if cuts else []
    scale_x, scale_y = file_scale(layout, page.shape)
    words = 0
    for (line, cut), reading in zip(cuts, readings):
        boxes = None
        if reading.alignment is not None:
            height = cut.image.shape[0]
            boxes = []
            for span in reading.alignment.words:
                corners = cut.page_points([(span.x0, 0), (span.x1, 0), (span.x1, height), (span.x0, height)])
                rectangle = [(x / scale_x, y / scale_y) for x, y in corners]
                boxes.append(WordBox(span.text, span.confidence, word_polygon(line.polygon, rectangle)))
            words += len(boxes)
        fill_line(layout, line, reading.text, reading.confidence, boxes)
    return len(cuts), words


@dataclasses.dataclass
class PageSources:
    """The layout files to recognize: ``paths``, the folder they were found in (``None`` for a
    list of files) and what was skipped finding them."""

    paths: list[Path]
    root: Path | None
    skips: Skips


def page_sources(source: str | Path | Sequence[str | Path]) -> PageSources:
    """The layout files of ``source``: a folder (searched recursively) or PAGE-XML/ALTO files.
    Raises for a missing path, a named file that is not PAGE/ALTO, or a folder without any
    (:func:`tfnhr.data.pages.reading.find_layout_files`); reads only the files' first bytes."""
    skips = Skips()
    root = Path(source) if isinstance(source, (str, Path)) and Path(source).is_dir() else None
    return PageSources(find_layout_files(source, skips), root, skips)


def recognize_pages(sources: PageSources, out_dir: str | Path, read: ReadLines, deskew: bool = True,
                    progress: bool = False) -> tuple[PagesSummary, Skips]:
    """Fill every layout file of ``sources`` and write it to ``out_dir`` under its path relative
    to the folder (its name, for files). Returns the summary and the skips (the caller warns)."""
    started = time.monotonic()
    skips, summary, root = sources.skips, PagesSummary(), sources.root
    for layout, page in read_pages(sources.paths, skips, root, progress, "pages"):
        lines, words = fill_page(layout, page, read, skips, deskew)
        target = Path(out_dir) / (layout.path.relative_to(root) if root is not None else layout.path.name)
        summary.written.append(str(save_layout(layout, target)))
        summary.pages += 1
        summary.lines += lines
        summary.words += words
    summary.seconds = time.monotonic() - started
    return summary, skips
