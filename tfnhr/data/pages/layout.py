"""Page layouts: PAGE-XML and ALTO files -> text lines with polygons, baselines and
transcriptions, in reading order.

Both formats describe a page image (``PAGE``: ``Page@imageFilename``; ``ALTO``:
``sourceImageInformation/fileName``) and its text lines:

* **PAGE-XML** (PRImA; the 2009/2010/2013/2017/2019 schemas, any namespace under
  :data:`PAGE_NAMESPACE_PREFIX`): every ``TextLine`` with ``Coords@points`` (or the 2009/2010
  ``Point`` children), ``Baseline@points`` and its ``TextEquiv/Unicode``: the one with the lowest
  ``index`` (or the only one); a line without one takes its ``Word`` texts joined by spaces.
  Reading order: ``ReadingOrder``'s region references (groups flattened, ``index`` order where
  given); a line belongs to its nearest region ancestor that the reading order lists (regions
  nested in regions work), lines of unlisted regions follow in document order.
* **ALTO** (v2-v4, namespace under :data:`ALTO_NAMESPACE_PREFIX` or none): every ``TextLine``,
  with ``Shape/Polygon@POINTS`` or else its ``HPOS VPOS WIDTH HEIGHT`` box, ``BASELINE`` (a y
  value in v2/v3, points in v4) and its ``String@CONTENT``s joined by single spaces (``SP``),
  a trailing ``HYP@CONTENT`` appended. Reading order: document order.

Coordinates are kept in the file's units with the page size the file declares, so callers scale
them to the image they load (ALTO may measure in ``mm10`` or ``inch1200``). The parsed lxml tree
stays with the layout, for writing recognized text back (:mod:`tfnhr.data.pages.writing`).
XML is parsed with lxml (whitespace and comments kept, no network access, no entity expansion).
"""

from __future__ import annotations

import dataclasses
import io
import math
import re
from pathlib import Path
from typing import Any, BinaryIO

from lxml import etree

PAGE_NAMESPACE_PREFIX = "http://schema.primaresearch.org/PAGE/gts/pagecontent/"
ALTO_NAMESPACE_PREFIX = "http://www.loc.gov/standards/alto/"
FORMATS = ("page", "alto")

Point = tuple[float, float]


class NotLayoutError(ValueError):
    """A file is not a PAGE-XML or ALTO file at all (the message names it and what it is);
    ``root``: its root element's name (``""`` when it is not XML)."""

    def __init__(self, message: str, root: str = "") -> None:
        super().__init__(message)
        self.root = root


class InvalidLayoutError(ValueError):
    """A PAGE-XML/ALTO file is not well-formed, or lacks what every page needs (its image and
    size); the message names the file and the problem."""


@dataclasses.dataclass(frozen=True)
class LayoutLine:
    """One text line of a page.

    ``id``: the element's id (``l<n>`` when the file gives none); ``polygon``: ``(x, y)``
    points in the file's coordinates, empty when the file's coordinates are missing or
    malformed; ``baseline``: points, possibly empty; ``text``: the transcription (single spaces,
    stripped), ``None`` when the file has none; ``element``: its lxml element.
    """

    id: str
    polygon: tuple[Point, ...]
    baseline: tuple[Point, ...]
    text: str | None
    element: Any = dataclasses.field(compare=False, repr=False)


@dataclasses.dataclass
class PageLayout:
    """A parsed PAGE-XML or ALTO file.

    ``format``: ``"page"`` or ``"alto"``; ``namespace``: the root's namespace (``""`` for none);
    ``image_name``: the page image as the file names it (usually relative to the file);
    ``size``: ``(width, height)`` the file declares, in its coordinate units (``None`` if it
    declares none; ALTO only); ``lines`` in reading order; ``tree``: the lxml document.
    """

    path: Path
    format: str
    namespace: str
    image_name: str
    size: tuple[float, float] | None
    lines: list[LayoutLine]
    tree: Any = dataclasses.field(repr=False)
    prolog: bytes = b""
    """The source's bytes before its root element (XML declaration, comments, document type,
    whitespace) as written, kept for writing back."""

    @property
    def id(self) -> str:
        """The page's id: its file name without the suffix."""
        return self.path.stem


def _parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, remove_blank_text=False)


def layout_format(path: str | Path) -> str:
    """``"page"`` or ``"alto"`` from the root element alone (reads only the file's start).

    Raises :class:`InvalidLayoutError` for a file that is not well-formed XML up to its root and
    :class:`NotLayoutError` for XML of another kind (e.g. METS) or a file that is not XML.
    """
    try:
        with open(path, "rb") as file:
            return _stream_format(file, path)
    except OSError as error:
        raise FileNotFoundError(f"{path}: cannot read ({error.strerror or error})") from None


def _stream_format(stream: BinaryIO, name: str | Path) -> str:
    try:
        for _, root in etree.iterparse(stream, events=("start",), resolve_entities=False, no_network=True):
            return _format_of(root.tag, name)
    except etree.XMLSyntaxError as error:
        stream.seek(0)
        start = stream.read(256).lstrip(b"\xef\xbb\xbf \t\r\n")
        if not start or start.startswith(b"<"):  # an empty file counts as damaged XML
            raise InvalidLayoutError(f"{name}: not well-formed XML ({error})") from None
        raise NotLayoutError(f"{name}: not an XML file, so neither PAGE-XML nor ALTO") from None
    raise InvalidLayoutError(f"{name}: no root element")


def _format_of(tag: str, path: str | Path) -> str:
    namespace, local = _split_tag(tag)
    if local == "PcGts" and namespace.startswith(PAGE_NAMESPACE_PREFIX):
        return "page"
    if local == "alto":  # ALTO's namespaces changed over the versions (none, CCS, LoC): the name decides
        return "alto"
    described = f"{{{namespace}}}{local}" if namespace else local
    raise NotLayoutError(f"{path}: neither PAGE-XML (root PcGts in {PAGE_NAMESPACE_PREFIX}...) nor ALTO "
                         f"(root alto): its root element is {described}", root=local)


def read_layout(path: str | Path) -> PageLayout:
    """Parse the PAGE-XML or ALTO file at ``path`` (see the module docstring).

    Raises :class:`NotLayoutError`, :class:`InvalidLayoutError` or ``FileNotFoundError``, each
    with a message naming the file.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise FileNotFoundError(f"{path}: cannot read ({error.strerror or error})") from None
    return parse_layout(data, path)


def parse_layout(data: bytes, path: str | Path) -> PageLayout:
    """Parse PAGE-XML or ALTO ``data``; ``path`` names it in errors and locates its image."""
    path = Path(path)
    fmt = _stream_format(io.BytesIO(data), path)
    try:
        tree = etree.parse(io.BytesIO(data), _parser())
    except etree.XMLSyntaxError as error:
        raise InvalidLayoutError(f"{path}: not well-formed XML ({error})") from None
    root = tree.getroot()
    namespace = _split_tag(root.tag)[0]
    reader = _read_page if fmt == "page" else _read_alto
    image_name, size, lines = reader(root, _Names(namespace), path)
    return PageLayout(path, fmt, namespace, image_name, size, lines, tree, _prolog(data))


_PROLOG_ITEM = re.compile(rb"\s+|<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^\[>]*(?:\[.*?\])?\s*>", re.S)


def _prolog(data: bytes) -> bytes:
    """The bytes before the root element: whitespace, processing instructions (the XML
    declaration), comments and a document type."""
    position = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    while match := _PROLOG_ITEM.match(data, position):
        position = match.end()
    return data[:position]


class _Names:
    """Qualified tag names in one namespace: ``names.TextLine`` -> ``{ns}TextLine``."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def __getattr__(self, local: str) -> str:
        return f"{{{self.namespace}}}{local}" if self.namespace else local


def _split_tag(tag: Any) -> tuple[str, str]:
    if not isinstance(tag, str):  # comments, processing instructions
        return "", ""
    if tag.startswith("{"):
        namespace, local = tag[1:].split("}", 1)
        return namespace, local
    return "", tag


def parse_points(text: str | None) -> tuple[Point, ...]:
    """``"x1,y1 x2,y2 ..."`` (PAGE, ALTO v4) or ``"x1 y1 x2 y2 ..."`` (older ALTO) -> points;
    empty for missing or malformed text (odd count, non-numbers, non-finite values)."""
    if not text:
        return ()
    try:
        values = [float(value) for value in text.replace(",", " ").split()]
    except ValueError:
        return ()
    if len(values) % 2 or not all(math.isfinite(value) for value in values):
        return ()
    return tuple(zip(values[0::2], values[1::2]))


def clean_text(text: str | None) -> str:
    """A transcription with runs of whitespace (newlines included) as single spaces, stripped."""
    return " ".join((text or "").split())


# ---------------------------------------------------------------------------------------------
# PAGE-XML

def _read_page(root, names: _Names, path: Path) -> tuple[str, tuple[float, float] | None, list[LayoutLine]]:
    page = root.find(names.Page)
    if page is None:
        raise InvalidLayoutError(f"{path}: PAGE-XML without a Page element")
    image_name = page.get("imageFilename")
    if not image_name:
        raise InvalidLayoutError(f"{path}: PAGE-XML Page without imageFilename")
    try:
        size = (float(page.get("imageWidth")), float(page.get("imageHeight")))
    except (TypeError, ValueError):
        raise InvalidLayoutError(f"{path}: PAGE-XML Page without a numeric imageWidth and imageHeight") from None
    order = _reading_order(page.find(names.ReadingOrder))
    elements = list(page.iter(names.TextLine))
    rank = {id(element): _order_rank(element, order) for element in elements}
    elements.sort(key=lambda element: rank[id(element)])  # stable: document order within a rank
    lines = [LayoutLine(element.get("id") or f"l{number}", _page_points(element.find(names.Coords), names),
                        parse_points(_attribute(element.find(names.Baseline), "points")),
                        _page_text(element, names), element)
             for number, element in enumerate(elements)]
    return image_name, size if all(size) else None, lines


def _attribute(element, name: str) -> str | None:
    return None if element is None else element.get(name)


def _page_points(coords, names: _Names) -> tuple[Point, ...]:
    """``Coords@points``, or the ``Point x y`` children of the 2009/2010 schemas."""
    if coords is None:
        return ()
    if coords.get("points") is not None:
        return parse_points(coords.get("points"))
    return parse_points(" ".join(f"{point.get('x')},{point.get('y')}" for point in coords.iter(names.Point)))


def _page_text(element, names: _Names) -> str | None:
    """The line's own lowest-index (or only) ``TextEquiv/Unicode``, else its words' texts."""
    own = _best_text_equiv(element, names)
    if own is not None:
        return own
    words = [_best_text_equiv(word, names) for word in element.findall(names.Word)]
    words = [word for word in words if word]
    return " ".join(words) if words else None


def _best_text_equiv(element, names: _Names) -> str | None:
    equivs = element.findall(names.TextEquiv)
    if not equivs:
        return None

    def index(equiv) -> float:
        try:
            return float(equiv.get("index"))
        except (TypeError, ValueError):
            return math.inf

    best = min(equivs, key=index)  # min keeps the first of equal keys
    unicode = best.find(names.Unicode)
    text = clean_text(unicode.text if unicode is not None else None)
    return text if text else None


def _reading_order(element) -> dict[str, int]:
    """Region id -> position in the reading order (groups flattened depth-first; children with an
    ``index`` in index order)."""
    order: dict[str, int] = {}
    if element is None:
        return order

    def walk(node) -> None:
        children = [child for child in node if isinstance(child.tag, str)]
        if any(child.get("index") is not None for child in children):
            children.sort(key=lambda child: _int_or(child.get("index"), math.inf))
        for child in children:
            reference = child.get("regionRef")
            if reference and reference not in order:
                order[reference] = len(order)
            walk(child)

    walk(element)
    return order


def _int_or(text: str | None, default: float) -> float:
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def _order_rank(line, order: dict[str, int]) -> float:
    """The reading-order position of the line's nearest listed region ancestor (``inf`` if none)."""
    for ancestor in line.iterancestors():
        position = order.get(ancestor.get("id"))
        if position is not None:
            return position
    return math.inf


# ---------------------------------------------------------------------------------------------
# ALTO

def _read_alto(root, names: _Names, path: Path) -> tuple[str, tuple[float, float] | None, list[LayoutLine]]:
    file_name = root.find(f"{names.Description}/{names.sourceImageInformation}/{names.fileName}")
    image_name = (file_name.text or "").strip() if file_name is not None else ""
    if not image_name:
        raise InvalidLayoutError(f"{path}: ALTO without Description/sourceImageInformation/fileName (the page image)")
    page = root.find(f"{names.Layout}/{names.Page}")
    if page is None:
        raise InvalidLayoutError(f"{path}: ALTO without a Layout/Page element")
    size = (_float_or(page.get("WIDTH")), _float_or(page.get("HEIGHT")))
    lines = []
    for number, element in enumerate(page.iter(names.TextLine)):
        lines.append(LayoutLine(element.get("ID") or f"l{number}", _alto_polygon(element, names),
                                _alto_baseline(element), _alto_text(element, names), element))
    return image_name, size if all(size) else None, lines


def _float_or(text: str | None, default: float = 0.0) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) else default


def _alto_box(element) -> tuple[float, float, float, float] | None:
    """``(x, y, width, height)`` of an ALTO element, or ``None`` when any is missing/invalid."""
    values = [_float_or(element.get(name), math.nan) for name in ("HPOS", "VPOS", "WIDTH", "HEIGHT")]
    return None if any(math.isnan(value) for value in values) else tuple(values)


def _alto_polygon(element, names: _Names) -> tuple[Point, ...]:
    polygon = element.find(f"{names.Shape}/{names.Polygon}")
    if polygon is not None:
        return parse_points(polygon.get("POINTS"))
    box = _alto_box(element)
    if box is None:
        return ()
    x, y, width, height = box
    return ((x, y), (x + width, y), (x + width, y + height), (x, y + height))


def _alto_baseline(element) -> tuple[Point, ...]:
    """v4's points, or v2/v3's single y value as a horizontal line across the box."""
    text = element.get("BASELINE")
    if not text:
        return ()
    points = parse_points(text)
    if points:
        return points
    box, y = _alto_box(element), _float_or(text, math.nan)
    if box is None or math.isnan(y):
        return ()
    return ((box[0], y), (box[0] + box[2], y))


def _alto_text(element, names: _Names) -> str | None:
    words, hyphen = [], ""
    for child in element:
        if child.tag == names.String:
            words.append(clean_text(child.get("CONTENT")))
        elif child.tag == names.HYP:
            hyphen = child.get("CONTENT") or ""
    text = " ".join(word for word in words if word) + hyphen
    return text if text.strip() else None
