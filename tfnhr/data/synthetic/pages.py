"""Synthetic pages with layout files: rendered text lines (:mod:`tfnhr.data.synthetic.handwriting`) stacked on
a page, the page slightly rotated as a scan is, written as a Transkribus-style export with
PAGE-XML or ALTO.

Layout written by :func:`write_pages`::

    OUT/train/s0000.png  OUT/train/page/s0000.xml   (or alto/ for ALTO)
    OUT/valid/v0000.png  ...                        OUT/test/t0000.png ...
    OUT/<subset>/mets.xml                           (a stub, as exports have; readers ignore it)
    OUT/synthetic-pages.json                        (parameters and summary)

Each subset's lines use that subset's fonts (validation and test fonts are never seen in
training), so the pages reader's default split (the subfolders) keeps the held-out styles held out.
Every line's polygon is its rotated bounding rectangle and its baseline a segment three quarters
down it, both exact for the rendered page; word boxes are kept for tests that check alignment.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from pathlib import Path

import cv2
import numpy as np
from lxml import etree
from PIL import Image

from tfnhr.config.choices import SUBSETS
from tfnhr.data.synthetic.handwriting import RenderStyle, render_example
from tfnhr.runtime.progress import Progress

MARKER = "synthetic-pages.json"
SUBSET_FOLDERS = {"train": "train", "val": "valid", "test": "test"}
PAGE_PREFIX = {"train": "s", "val": "v", "test": "t"}
LAYOUT_FORMATS = {
    "page": ("page", "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"),
    "page-2013": ("page", "http://schema.primaresearch.org/PAGE/gts/pagecontent/2013-07-15"),
    "alto": ("alto", "http://www.loc.gov/standards/alto/ns-v4#"),
    "alto-2": ("alto", "http://www.loc.gov/standards/alto/ns-v2#"),
}
"""Formats :func:`write_pages` writes (:data:`~tfnhr.config.choices.PAGE_LAYOUTS`): name -> (family, namespace)."""
PAPER = 255
MARGIN = 60
"""Blank page margin, px (holds the rotation's overhang)."""


@dataclasses.dataclass(frozen=True)
class PageLine:
    """A rendered line on a page: ``text``, ``image`` (uint8 ``[h, w]`` as rendered, before the
    page rotation), ``polygon`` and ``baseline`` (page px, after it), ``word_boxes`` (``(x0, y0,
    x1, y1)`` in ``image``)."""

    id: str
    text: str
    image: np.ndarray
    polygon: tuple[tuple[float, float], ...]
    baseline: tuple[tuple[float, float], ...]
    word_boxes: tuple[tuple[int, int, int, int], ...]


def render_page(seed: int, split: str, first_line: int, line_count: int, max_angle: float = 1.5,
                style: RenderStyle = RenderStyle()) -> tuple[np.ndarray, list[PageLine], float]:
    """A page of lines ``first_line .. first_line + line_count - 1`` of ``split`` (the same
    examples as :func:`tfnhr.data.synthetic.handwriting.generate` gives): ``(uint8 [H, W] page, lines,
    angle in degrees)``; the angle is drawn from ``±max_angle`` per page."""
    rendered = [render_example(seed, "lines", split, first_line + n, style) for n in range(line_count)]
    rng = np.random.default_rng([seed, SUBSETS.index(split), first_line, 7])
    indents = rng.integers(0, 40, size=line_count)
    gaps = rng.integers(8, 30, size=line_count)
    width = int(max(example.image.shape[1] + indent for example, indent in zip(rendered, indents))) + 2 * MARGIN
    height = int(sum(example.image.shape[0] for example in rendered) + gaps.sum()) + 2 * MARGIN
    page = np.full((height, width), PAPER, np.uint8)
    angle = float(rng.uniform(-max_angle, max_angle)) if max_angle > 0 else 0.0
    rotation = cv2.getRotationMatrix2D(((width - 1) / 2, (height - 1) / 2), angle, 1.0)
    lines, y = [], MARGIN
    for number, ((image, text, boxes, _), indent, gap) in enumerate(zip(rendered, indents, gaps)):
        x, (h, w) = MARGIN + int(indent), image.shape
        page[y:y + h, x:x + w] = np.minimum(page[y:y + h, x:x + w], image)
        corners = [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
        base = y + round(0.75 * h)
        lines.append(PageLine(f"l{number}", text, image, _transform(corners, rotation),
                              _transform([(x, base), (x + w, base)], rotation), tuple(boxes)))
        y += h + int(gap)
    if angle:
        page = cv2.warpAffine(page, rotation, (width, height), flags=cv2.INTER_LINEAR, borderValue=PAPER)
    return page, lines, angle


def _transform(points, rotation: np.ndarray) -> tuple[tuple[float, float], ...]:
    """Points through the 2x3 affine ``rotation``, rounded to 0.1 px."""
    moved = np.asarray(points, np.float64) @ rotation[:, :2].T + rotation[:, 2]
    return tuple((round(float(px), 1), round(float(py), 1)) for px, py in moved)


def _points(points) -> str:
    return " ".join(f"{round(x)},{round(y)}" for x, y in points)


def page_xml(image_name: str, size: tuple[int, int], lines: list[PageLine], namespace: str) -> bytes:
    """A PAGE-XML document: one ``TextRegion`` with the lines (``Coords``, ``Baseline``,
    ``TextEquiv``) and a reading order naming it."""
    ns = f"{{{namespace}}}"
    root = etree.Element(f"{ns}PcGts", nsmap={None: namespace})
    metadata = etree.SubElement(root, f"{ns}Metadata")
    etree.SubElement(metadata, f"{ns}Creator").text = "tfnhr synthetic pages"
    etree.SubElement(metadata, f"{ns}Created").text = "2026-01-01T00:00:00"
    etree.SubElement(metadata, f"{ns}LastChange").text = "2026-01-01T00:00:00"
    page = etree.SubElement(root, f"{ns}Page", imageFilename=image_name, imageWidth=str(size[0]),
                            imageHeight=str(size[1]))
    order = etree.SubElement(etree.SubElement(page, f"{ns}ReadingOrder"), f"{ns}OrderedGroup", id="ro0")
    etree.SubElement(order, f"{ns}RegionRefIndexed", index="0", regionRef="r0")
    region = etree.SubElement(page, f"{ns}TextRegion", id="r0")
    points = np.array([point for line in lines for point in line.polygon])
    x0, y0 = points.min(axis=0)
    x1, y1 = points.max(axis=0)
    etree.SubElement(region, f"{ns}Coords", points=_points([(x0, y0), (x1, y0), (x1, y1), (x0, y1)]))
    for line in lines:
        element = etree.SubElement(region, f"{ns}TextLine", id=line.id)
        etree.SubElement(element, f"{ns}Coords", points=_points(line.polygon))
        etree.SubElement(element, f"{ns}Baseline", points=_points(line.baseline))
        etree.SubElement(etree.SubElement(element, f"{ns}TextEquiv"), f"{ns}Unicode").text = line.text
    etree.indent(root, space=" ")
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)


def alto_xml(image_name: str, size: tuple[int, int], lines: list[PageLine], namespace: str) -> bytes:
    """An ALTO document in pixels: one ``TextBlock`` with the lines (box, ``Shape/Polygon``,
    ``BASELINE``: points in v4, a y value before) and their words as ``String``/``SP``."""
    ns = f"{{{namespace}}}"
    version4 = namespace.endswith("v4#")
    root = etree.Element(f"{ns}alto", nsmap={None: namespace})
    description = etree.SubElement(root, f"{ns}Description")
    etree.SubElement(description, f"{ns}MeasurementUnit").text = "pixel"
    source = etree.SubElement(description, f"{ns}sourceImageInformation")
    etree.SubElement(source, f"{ns}fileName").text = image_name
    page = etree.SubElement(etree.SubElement(root, f"{ns}Layout"), f"{ns}Page", ID="p0", PHYSICAL_IMG_NR="1",
                            WIDTH=str(size[0]), HEIGHT=str(size[1]))
    block = etree.SubElement(etree.SubElement(page, f"{ns}PrintSpace"), f"{ns}TextBlock", ID="b0")
    for line in lines:
        xs, ys = zip(*line.polygon)
        box = {"HPOS": str(round(min(xs))), "VPOS": str(round(min(ys))),
               "WIDTH": str(round(max(xs) - min(xs))), "HEIGHT": str(round(max(ys) - min(ys)))}
        baseline = (" ".join(f"{round(x)},{round(y)}" for x, y in line.baseline) if version4
                    else str(round(sum(y for _, y in line.baseline) / len(line.baseline))))
        element = etree.SubElement(block, f"{ns}TextLine", ID=line.id, BASELINE=baseline, **box)
        etree.SubElement(etree.SubElement(element, f"{ns}Shape"), f"{ns}Polygon",
                         POINTS=" ".join(f"{round(x)},{round(y)}" for x, y in line.polygon))
        for number, word in enumerate(line.text.split()):
            if number:
                etree.SubElement(element, f"{ns}SP")
            etree.SubElement(element, f"{ns}String", CONTENT=word)
    etree.indent(root, space=" ")
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)


_METS_STUB = (b'<?xml version="1.0" encoding="UTF-8"?>\n'
              b'<mets:mets xmlns:mets="http://www.loc.gov/METS/"><mets:fileSec/></mets:mets>\n')


def write_pages(out_dir: str | Path, counts: Mapping[str, int], layout: str = "page", seed: int = 0,
                lines_per_page: tuple[int, int] = (4, 8), max_angle: float = 1.5,
                style: RenderStyle = RenderStyle(), progress: bool = True) -> dict:
    """Write synthetic pages (see the module docstring) and return a summary.

    ``counts``: pages per subset, e.g. ``{"train": 60, "val": 6, "test": 6}``; ``layout``: one of
    :data:`LAYOUT_FORMATS`. ``out_dir`` must be new, empty or an earlier such set (replaced).
    Returns ``{"out_dir", "layout", "seed", "pages": {subset: n}, "lines": {subset: n},
    "seconds"}``.
    """
    if layout not in LAYOUT_FORMATS:
        raise ValueError(f"layout must be one of {tuple(LAYOUT_FORMATS)}, got {layout!r}")
    if set(counts) - set(SUBSETS) or any(n < 0 for n in counts.values()):
        raise ValueError(f"counts must map subsets {SUBSETS} to numbers >= 0, got {dict(counts)}")
    low, high = lines_per_page
    if not 1 <= low <= high:
        raise ValueError(f"lines_per_page must be (low, high) with 1 <= low <= high, got {lines_per_page}")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise FileExistsError(f"{out} is not empty and holds no synthetic pages ({MARKER} missing); "
                              "choose an empty or new folder")
    family, namespace = LAYOUT_FORMATS[layout]
    started = time.perf_counter()
    bar = Progress(sum(counts.values()), "synth pages", unit="pages", enabled=progress)
    pages, line_counts = {}, {}
    for subset, count in counts.items():
        folder = out / SUBSET_FOLDERS[subset]
        xml_folder = folder / family
        xml_folder.mkdir(parents=True, exist_ok=True)
        (folder / "mets.xml").write_bytes(_METS_STUB)
        rng = np.random.default_rng([seed, SUBSETS.index(subset)])
        first = 0
        for index in range(count):
            line_count = int(rng.integers(low, high + 1))
            page, lines, _ = render_page(seed, subset, first, line_count, max_angle, style)
            first += line_count
            page_id = f"{PAGE_PREFIX[subset]}{index:04d}"
            Image.fromarray(page).save(folder / f"{page_id}.png", compress_level=1)
            write = page_xml if family == "page" else alto_xml
            size = (page.shape[1], page.shape[0])
            (xml_folder / f"{page_id}.xml").write_bytes(write(f"{page_id}.png", size, lines, namespace))
            bar.step()
        pages[subset], line_counts[subset] = count, first
    summary = {"out_dir": str(out), "layout": layout, "seed": seed, "pages": pages, "lines": line_counts,
               "seconds": round(time.perf_counter() - started, 3)}
    (out / MARKER).write_text(json.dumps({**summary, "lines_per_page": list(lines_per_page),
                                          "max_angle": max_angle, "style": dataclasses.asdict(style)}, indent=1) + "\n")
    return summary
