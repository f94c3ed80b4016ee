"""``POST /recognize/page``: a page image with its PAGE-XML or ALTO file in, the same file with the
recognized text of every line out (:mod:`tfnhr.recognition.pages`).

The body is ``multipart/form-data`` with two file parts: the layout file (a name ending in
``.xml``) and the page image. Problems raise :class:`~tfnhr.serving.payload.RequestError`: 415
for another content type, 400 for missing or extra parts, a file that is not PAGE-XML/ALTO or is
damaged, or an image that cannot be read, 413 for an image above the page limit, 422 for an image
that is not the layout's page (other proportions than the layout declares, or no line readable on
it).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfnhr.data.pages.layout import InvalidLayoutError, NotLayoutError, PageLayout, parse_layout
from tfnhr.data.pages.writing import layout_bytes
from tfnhr.data.pages.reading import SKIP_KINDS, Skips
from tfnhr.recognition.pages import ReadLines, fill_page
from tfnhr.serving.payload import RequestError, body_kind, image_parts, read_gray


@dataclasses.dataclass(frozen=True)
class FilledPage:
    """The answer: ``xml`` (the filled file, in its own encoding), the ``lines`` recognized and
    the ``skipped`` lines by kind (:data:`~tfnhr.data.pages.reading.SKIP_KINDS`)."""

    xml: bytes
    lines: int
    skipped: dict[str, int]


def page_parts(body: bytes, content_type: str | None) -> tuple[tuple[str, bytes], tuple[str, bytes]]:
    """``((layout name, layout bytes), (image name, image bytes))`` of a page request body."""
    if body_kind(content_type) != "multipart":
        raise RequestError(415, "send multipart/form-data with the page image and its PAGE-XML/ALTO file")
    parts = image_parts(body, content_type)
    layouts = [part for part in parts if part[0].lower().endswith(".xml")]
    images = [part for part in parts if not part[0].lower().endswith(".xml")]
    if len(layouts) != 1 or len(images) != 1:
        names = ", ".join(name for name, _ in parts)
        raise RequestError(400, f"expected one .xml file (PAGE-XML or ALTO) and one page image, got: {names}")
    return layouts[0], images[0]


def fill_page_request(body: bytes, content_type: str | None, read: ReadLines, max_height: int,
                      max_width: int) -> FilledPage:
    """Read the request's layout and image (the image at most ``max_height`` x ``max_width``
    px), recognize every line with ``read`` and return the filled file."""
    (layout_name, layout_data), (image_name, image_data) = page_parts(body, content_type)
    try:
        layout = parse_layout(layout_data, layout_name)
    except (NotLayoutError, InvalidLayoutError) as error:
        raise RequestError(400, str(error)) from None
    page: np.ndarray = read_gray(image_data, image_name, max_height, max_width)
    check_proportions(layout, page.shape, image_name)
    skips = Skips()
    lines, _ = fill_page(layout, page, read, skips)
    skipped = {kind: skips.count(kind) for kind in SKIP_KINDS if skips.count(kind)}
    if lines == 0 and skipped:
        counts = ", ".join(f"{count} {SKIP_KINDS[kind]}" for kind, count in skipped.items())
        raise RequestError(422, f"no line of {layout_name} could be read on {image_name} ({counts}): "
                                "is it the page image of this layout?")
    return FilledPage(layout_bytes(layout), lines, skipped)


PROPORTION_TOLERANCE = 0.05
"""How far (relative) a page image's width/height ratio may be from its layout's before the image
is taken for another page's."""


def check_proportions(layout: PageLayout, shape: tuple[int, int], image_name: str) -> None:
    """:class:`~tfnhr.serving.payload.RequestError` 422 when the layout declares a page size whose
    width/height ratio differs from the image's (``shape`` ``[H, W]``) by more than
    :data:`PROPORTION_TOLERANCE` (a scaled scan keeps its proportions; another page rarely has them)."""
    if layout.size is None:
        return
    declared = layout.size[0] / layout.size[1]
    actual = shape[1] / shape[0]
    if abs(actual / declared - 1) > PROPORTION_TOLERANCE:
        raise RequestError(422, f"{image_name} is {shape[1]}x{shape[0]} px (width x height) but its layout declares "
                                f"a page of {layout.size[0]}x{layout.size[1]}: is it the page image of this layout?")
