"""Reading PAGE-XML and ALTO files: generated pages of every written schema give back exactly the
lines they were written with; hand-written export-style files give their lines in reading order
with the right transcription; files that are not layouts or are damaged are one-line errors."""

from __future__ import annotations

import math

import pytest

from tfnhr.config.choices import PAGE_LAYOUTS
from tfnhr.data.pages.layout import (InvalidLayoutError, NotLayoutError, clean_text, layout_format,
                                     parse_points, read_layout)
from tfnhr.data.synthetic.pages import LAYOUT_FORMATS, SUBSET_FOLDERS, render_page, write_pages
from tests.helpers.page_fixtures import (ALTO_MM10, PAGE_2010_POINTS, TRANSKRIBUS_LINES, TRANSKRIBUS_PAGE,
                                         write_page)


def test_the_synthetic_layouts_are_the_shared_choices():
    assert tuple(LAYOUT_FORMATS) == PAGE_LAYOUTS


@pytest.mark.parametrize("layout", PAGE_LAYOUTS)
def test_generated_pages_read_back_with_their_lines_polygons_and_texts(tmp_path, layout):
    """Every schema tfnhr writes (PAGE 2019/2013, ALTO v4/v2) reads back to the rendered lines:
    ids and texts in order, polygons and baselines within the file's 0.5 px rounding."""
    write_pages(tmp_path, {"train": 2}, layout=layout, seed=3, progress=False)
    family = LAYOUT_FORMATS[layout][0]
    for index in range(2):
        parsed = read_layout(tmp_path / SUBSET_FOLDERS["train"] / family / f"s{index:04d}.xml")
        assert parsed.format == family and parsed.image_name == f"s{index:04d}.png"
        first = sum(len(read_layout(tmp_path / "train" / family / f"s{i:04d}.xml").lines) for i in range(index))
        page, lines, _ = render_page(3, "train", first, len(parsed.lines))
        assert parsed.size == (page.shape[1], page.shape[0])
        assert [(line.id, line.text) for line in parsed.lines] == [(line.id, line.text) for line in lines]
        for got, want in zip(parsed.lines, lines):
            assert len(got.polygon) == 4
            assert max(math.dist(a, b) for a, b in zip(got.polygon, want.polygon)) <= 0.71
            if layout in ("alto-2",):  # one y value: a horizontal baseline at the mean height
                assert got.baseline[0][1] == got.baseline[1][1]
            else:
                assert max(math.dist(a, b) for a, b in zip(got.baseline, want.baseline)) <= 0.71


def test_an_export_style_page_gives_its_lines_in_reading_order(tmp_path):
    """Reading order beats document order; a region nested in a listed table region follows the
    table; an unlisted region comes last; the lowest-index TextEquiv wins over document order; a
    line with only words joins them; a line without any text has None; whitespace is collapsed."""
    layout = read_layout(write_page(tmp_path, "IMG_0001.xml", TRANSKRIBUS_PAGE, "IMG_0001.png", (600, 400)))
    assert layout.format == "page" and layout.size == (600.0, 400.0)
    assert layout.namespace.endswith("2013-07-15")
    assert [(line.id, line.text) for line in layout.lines] == TRANSKRIBUS_LINES
    head = layout.lines[0]
    assert head.polygon == ((100, 30), (500, 30), (500, 70), (100, 70))
    assert head.baseline == ((100, 62), (500, 62))
    assert layout.prolog == (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
                             b"<!-- exported by a transcription platform -->\n")


def test_alto_with_other_units_hyphens_and_old_polygons(tmp_path):
    layout = read_layout(write_page(tmp_path, "scan_0007.xml", ALTO_MM10, "scan_0007.png", (600, 450)))
    assert layout.format == "alto" and layout.size == (2000.0, 1500.0) and layout.image_name == "scan_0007.png"
    assert [(line.id, line.text) for line in layout.lines] == [("line1", "over the hyphen-"), ("line2", "second")]
    assert layout.lines[0].polygon == ((100, 200), (1100, 200), (1100, 350), (100, 350))  # from its box
    assert layout.lines[0].baseline == ((100, 330), (1100, 330))  # one y value across the box
    assert layout.lines[1].polygon == ((100, 400), (1500, 400), (1500, 560), (100, 560))  # "x y x y"


def test_page_2010_point_children(tmp_path):
    layout = read_layout(write_page(tmp_path, "old.xml", PAGE_2010_POINTS, "old.png", (300, 200)))
    assert [(line.id, line.text, line.polygon) for line in layout.lines] == [
        ("l1", "old schema", ((20, 20), (280, 20), (280, 60), (20, 60)))]


@pytest.mark.parametrize("text, points", [
    ("1,2 3,4 5,6", ((1, 2), (3, 4), (5, 6))),
    ("1 2 3 4", ((1, 2), (3, 4))),
    ("1.5,2.25", ((1.5, 2.25),)),
    ("", ()), (None, ()), ("1,2 3", ()), ("a,b", ()), ("1,nan", ()), ("1,inf 2,3", ()),
])
def test_points(text, points):
    assert parse_points(text) == points


def test_clean_text():
    assert clean_text("  a \n b\t c ") == "a b c" and clean_text(None) == ""


@pytest.mark.parametrize("content, error, message", [
    (b'<?xml version="1.0"?><mets:mets xmlns:mets="http://www.loc.gov/METS/"/>', NotLayoutError,
     "its root element is {http://www.loc.gov/METS/}mets"),
    (b"<html><body/></html>", NotLayoutError, "its root element is html"),
    (b"\x89PNG\r\n\x1a\n binary", NotLayoutError, "not an XML file"),
    (b"", InvalidLayoutError, "not well-formed XML"),
    (b'<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"><Page>',
     InvalidLayoutError, "not well-formed XML"),
    (b'<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"/>',
     InvalidLayoutError, "PAGE-XML without a Page element"),
    (b'<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"><Page imageFilename="a.png"/>'
     b'</PcGts>', InvalidLayoutError, "without a numeric imageWidth and imageHeight"),
    (b'<alto xmlns="http://www.loc.gov/standards/alto/ns-v4#"><Layout><Page/></Layout></alto>',
     InvalidLayoutError, "ALTO without Description/sourceImageInformation/fileName"),
])
def test_files_that_are_not_usable_layouts_are_one_line_errors_naming_them(tmp_path, content, error, message):
    path = tmp_path / "file.xml"
    path.write_bytes(content)
    with pytest.raises(error) as raised:
        read_layout(path)
    assert str(raised.value).startswith(f"{path}: ") and message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_layout_format_reads_only_the_root(tmp_path):
    path = tmp_path / "big.xml"
    path.write_bytes(b'<alto xmlns="http://www.loc.gov/standards/alto/ns-v2#">' + b"<x/>" * 1000)  # never closed
    assert layout_format(path) == "alto"
    with pytest.raises(FileNotFoundError, match="missing.xml: cannot read"):
        layout_format(tmp_path / "missing.xml")
