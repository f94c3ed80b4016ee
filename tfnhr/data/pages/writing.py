"""Writing recognized text back into PAGE-XML and ALTO files, leaving the rest of each file as it was.

For each recognized line (an element of :attr:`PageLayout.tree`):

* **PAGE-XML**: the line's ``TextEquiv`` and ``Word`` children are replaced by one ``Word`` per
  recognized word (``id`` = ``LINEID_wN``, ``Coords`` from the alignment, clipped to the line's
  polygon, ``TextEquiv@conf``), when word positions are known, and one ``TextEquiv@conf`` with the
  line's text, placed where the schema wants them (after ``Coords``/``Baseline``, before
  ``TextStyle``, ``UserDefined``, ``Labels``). Region-level ``TextEquiv`` is not touched.
* **ALTO**: the line's ``String``/``SP``/``HYP`` children are replaced by one ``String``
  (``CONTENT``, ``WC``, and ``HPOS VPOS WIDTH HEIGHT`` when positions are known) per word with
  ``SP`` between; an empty line gets one empty ``String`` (ALTO requires one).

Nothing else changes: other elements, attributes, comments, namespace prefixes, the XML
declaration and the encoding stay; new elements take the file's indentation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from lxml import etree
from shapely.geometry import Polygon, box

from tfnhr.data.pages.layout import LayoutLine, PageLayout

Point = tuple[float, float]


@dataclasses.dataclass(frozen=True)
class WordBox:
    """A recognized word: ``text``, ``confidence`` in [0, 1] and ``polygon`` in the file's units
    (``()`` when its position is unknown)."""

    text: str
    confidence: float
    polygon: tuple[Point, ...] = ()


_PAGE_AFTER_TEXT = ("TextStyle", "UserDefined", "Labels")
"""PAGE ``TextLine`` children that follow ``Word``/``TextEquiv`` in the schema."""


def fill_line(layout: PageLayout, line: LayoutLine, text: str, confidence: float,
              words: Sequence[WordBox] | None = None) -> None:
    """Write ``text`` (confidence in [0, 1]) and ``words`` (``None``: positions unknown, only
    ALTO splits the text into ``String``s then) into ``line``'s element of ``layout.tree``."""
    if layout.format == "page":
        _fill_page_line(layout.namespace, line, text, confidence, words)
    else:
        _fill_alto_line(layout.namespace, line, text, confidence, words)


def _qualified(namespace: str, local: str) -> str:
    return f"{{{namespace}}}{local}" if namespace else local


def _local(element) -> str:
    return etree.QName(element).localname if isinstance(element.tag, str) else ""


def _conf(value: float) -> str:
    return f"{min(max(value, 0.0), 1.0):.4f}"


def _fill_page_line(namespace: str, line: LayoutLine, text: str, confidence: float,
                    words: Sequence[WordBox] | None) -> None:
    element, q = line.element, (lambda local: _qualified(namespace, local))
    for child in [child for child in element if _local(child) in ("TextEquiv", "Word")]:
        _remove(child)
    new = []
    for number, word in enumerate(words or ()):
        if not word.polygon:
            continue
        word_element = etree.Element(q("Word"), id=f"{line.id}_w{number}")
        etree.SubElement(word_element, q("Coords"), points=" ".join(f"{round(x)},{round(y)}" for x, y in word.polygon))
        equiv = etree.SubElement(word_element, q("TextEquiv"), conf=_conf(word.confidence))
        etree.SubElement(equiv, q("Unicode")).text = word.text
        new.append(word_element)
    equiv = etree.Element(q("TextEquiv"), conf=_conf(confidence))
    etree.SubElement(equiv, q("Unicode")).text = text
    new.append(equiv)
    following = next((child for child in element if _local(child) in _PAGE_AFTER_TEXT), None)
    position = element.index(following) if following is not None else len(element)
    _insert(element, position, new)


def _fill_alto_line(namespace: str, line: LayoutLine, text: str, confidence: float,
                    words: Sequence[WordBox] | None) -> None:
    element, q = line.element, (lambda local: _qualified(namespace, local))
    for child in [child for child in element if _local(child) in ("String", "SP", "HYP")]:
        _remove(child)
    if words is None:
        words = [WordBox(word, confidence) for word in text.split()]
    new = []
    for number, word in enumerate(words or [WordBox("", confidence)]):
        if number:
            new.append(etree.Element(q("SP")))
        attributes = {"CONTENT": word.text, "WC": _conf(word.confidence)}
        if word.polygon:
            xs, ys = zip(*word.polygon)
            attributes.update(HPOS=str(round(min(xs))), VPOS=str(round(min(ys))),
                              WIDTH=str(round(max(xs) - min(xs))), HEIGHT=str(round(max(ys) - min(ys))))
        new.append(etree.Element(q("String"), attributes))
    _insert(element, len(element), new)


def _remove(child) -> None:
    child.getparent().remove(child)


def _insert(parent, position: int, elements: Sequence) -> None:
    """Insert ``elements`` into ``parent`` at ``position``; when the file is indented, re-indent
    ``parent``'s content in the file's style (its other children keep their whitespace when the
    file is consistently indented)."""
    for offset, element in enumerate(elements):
        parent.insert(position + offset, element)
    level = sum(1 for _ in parent.iterancestors())
    candidates = [parent.text] + [child.tail for child in parent]
    indent = next((text for text in candidates if text and not text.strip() and "\n" in text), None)
    if indent is None:  # not indented: leave it so
        return
    width = len(indent.rsplit("\n", 1)[1])
    step = indent.rsplit("\n", 1)[1][:width // (level + 1)] if width else ""
    etree.indent(parent, space=step or " ", level=level)


def word_polygon(line_polygon: Sequence[Point], rectangle: Sequence[Point]) -> tuple[Point, ...]:
    """A word's ``rectangle`` (4 points, file units) clipped to its line's polygon: the exterior
    of the largest part, or the rectangle itself when they do not overlap."""
    word = Polygon(rectangle)
    line = Polygon(line_polygon) if len(line_polygon) >= 3 else None
    if line is not None and line.is_valid and word.is_valid:
        clipped = word.intersection(line)
        parts = [part for part in getattr(clipped, "geoms", [clipped]) if isinstance(part, Polygon) and part.area > 0]
        if parts:
            largest = max(parts, key=lambda part: part.area)
            return tuple((float(x), float(y)) for x, y in largest.exterior.coords[:-1])
    minx, miny, maxx, maxy = box(*word.bounds).bounds
    return ((minx, miny), (maxx, miny), (maxx, maxy), (minx, maxy))


def layout_bytes(layout: PageLayout) -> bytes:
    """The document in the source's encoding: the source's prolog (declaration, comments, ...)
    as it was written, the root element, then what follows it (comments), ending in a newline."""
    encoding = layout.tree.docinfo.encoding or "UTF-8"
    root = layout.tree.getroot()
    parts = [layout.prolog, etree.tostring(root, encoding=encoding, xml_declaration=False, with_tail=False)]
    parts += [b"\n" + etree.tostring(sibling, encoding=encoding, with_tail=False) for sibling in root.itersiblings()]
    return b"".join(parts) + b"\n"


def save_layout(layout: PageLayout, path: str | Path) -> Path:
    """Write :func:`layout_bytes` to ``path`` (folders made; may be the source file itself)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(layout_bytes(layout))
    return path
