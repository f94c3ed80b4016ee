"""Writing recognized text into PAGE-XML and ALTO: the text and words land where the schemas want
them and read back, and everything else in the file is unchanged after canonicalisation (the
declaration, encoding, comments and unrelated elements byte for byte)."""

from __future__ import annotations

import pytest
from lxml import etree

from tfnhr.data.pages.layout import read_layout
from tfnhr.data.pages.writing import WordBox, fill_line, layout_bytes, save_layout, word_polygon
from tests.helpers.page_fixtures import ALTO_MM10, TRANSKRIBUS_PAGE, without_line_text, write_page

def test_page_lines_get_words_and_text_and_nothing_else_changes(tmp_path):
    source = write_page(tmp_path, "IMG_0001.xml", TRANSKRIBUS_PAGE, "IMG_0001.png", (600, 400))
    layout = read_layout(source)
    lines = {line.id: line for line in layout.lines}
    fill_line(layout, lines["body_l1"], "first boby line", 0.8125,
              [WordBox("first", 0.9, ((30, 110), (120, 110), (120, 145), (30, 145))),
               WordBox("boby", 0.5, ((130, 110), (220, 110), (220, 145), (130, 145))),
               WordBox("line", 0.75, ())])  # no position: no Word element
    fill_line(layout, lines["cell_l1"], "table cell", 0.5)
    fill_line(layout, lines["body_l3"], "", 0.25)
    written = save_layout(layout, tmp_path / "out" / "IMG_0001.xml")
    data = written.read_bytes()
    assert data.startswith(b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
                           b"<!-- exported by a transcription platform -->\n<PcGts")
    again = read_layout(written)
    texts = {line.id: line.text for line in again.lines}
    assert texts["body_l1"] == "first boby line" and texts["cell_l1"] == "table cell" and texts["body_l3"] is None
    assert texts["head_l1"] == "A Heading" and texts["body_l2"] == "second line"  # untouched lines
    assert without_line_text(again.tree, "page") == without_line_text(read_layout(source).tree, "page")

    body = next(line for line in again.lines if line.id == "body_l1").element
    names = [etree.QName(child).localname for child in body]
    assert names == ["Coords", "Baseline", "Word", "Word", "TextEquiv", "TextStyle"]
    ns = {"p": again.namespace}
    assert body.xpath("p:TextEquiv/@conf", namespaces=ns) == ["0.8125"]
    assert body.xpath("p:Word/@id", namespaces=ns) == ["body_l1_w0", "body_l1_w1"]
    assert body.xpath("p:Word/p:Coords/@points", namespaces=ns) == ["30,110 120,110 120,145 30,145",
                                                                     "130,110 220,110 220,145 130,145"]
    assert body.xpath("p:Word/p:TextEquiv/p:Unicode/text()", namespaces=ns) == ["first", "boby"]
    cell = next(line for line in again.lines if line.id == "cell_l1").element
    assert [etree.QName(child).localname for child in cell] == ["Coords", "Baseline", "TextEquiv", "UserDefined"]
    # the new elements are indented like their neighbours
    assert b'\n                <TextEquiv conf="0.8125">\n                    <Unicode>first boby line</Unicode>' in data


def test_alto_lines_get_strings_and_the_file_keeps_its_encoding(tmp_path):
    source = write_page(tmp_path, "scan_0007.xml", ALTO_MM10, "scan_0007.png", (600, 450))
    layout = read_layout(source)
    first, second = layout.lines
    fill_line(layout, first, "over the", 0.7,
              [WordBox("over", 0.875, ((100, 200), (400, 200), (400, 350), (100, 350))),
               WordBox("the", 0.5, ((420, 205), (620, 205), (620, 350), (420, 350)))])
    fill_line(layout, second, "", 0.125, None)
    written = save_layout(layout, tmp_path / "out.xml")
    data = written.read_bytes()
    assert data.startswith(b'<?xml version="1.0" encoding="ISO-8859-1"?>\n')
    assert "Präzisions-OCR".encode("iso-8859-1") in data
    again = read_layout(written)
    assert [line.text for line in again.lines] == ["over the", None]
    assert without_line_text(again.tree, "alto") == without_line_text(read_layout(source).tree, "alto")
    ns = {"a": again.namespace}
    strings = again.lines[0].element.xpath("a:String", namespaces=ns)
    assert [dict(s.attrib) for s in strings] == [
        {"CONTENT": "over", "WC": "0.8750", "HPOS": "100", "VPOS": "200", "WIDTH": "300", "HEIGHT": "150"},
        {"CONTENT": "the", "WC": "0.5000", "HPOS": "420", "VPOS": "205", "WIDTH": "200", "HEIGHT": "145"}]
    assert [etree.QName(c).localname for c in again.lines[0].element] == ["String", "SP", "String"]
    empty = again.lines[1].element
    assert [etree.QName(c).localname for c in empty] == ["Shape", "String"]  # ALTO needs one String
    assert dict(empty[1].attrib) == {"CONTENT": "", "WC": "0.1250"}


def test_alto_without_word_positions_splits_the_text(tmp_path):
    layout = read_layout(write_page(tmp_path, "scan_0007.xml", ALTO_MM10, "scan_0007.png", (600, 450)))
    fill_line(layout, layout.lines[0], "a b", 0.5, None)
    element = layout.lines[0].element
    assert [(etree.QName(c).localname, c.get("CONTENT"), c.get("WC")) for c in element] == [
        ("String", "a", "0.5000"), ("SP", None, None), ("String", "b", "0.5000")]


def test_an_unindented_file_stays_unindented(tmp_path):
    xml = TRANSKRIBUS_PAGE.split("?>", 1)[1]
    flat = etree.tostring(etree.fromstring(xml.encode(), etree.XMLParser(remove_blank_text=True)))
    layout = read_layout(write_page(tmp_path, "IMG_0001.xml", flat.decode(), "IMG_0001.png", (600, 400)))
    fill_line(layout, layout.lines[0], "x", 1.0)
    written = etree.fromstring(layout_bytes(layout))
    assert not [node for node in written.iter() for text in (node.text, node.tail)
                if text is not None and not text.strip()]


@pytest.mark.parametrize("rectangle, expected", [
    (((0, 0), (10, 0), (10, 10), (0, 10)), {(0, 0), (10, 0), (10, 10), (0, 10)}),
    (((5, -5), (15, -5), (15, 5), (5, 5)), {(5, 0), (10, 0), (10, 5), (5, 5)}),  # clipped to the line
    (((20, 20), (30, 20), (30, 30), (20, 30)), {(20, 20), (30, 20), (30, 30), (20, 30)}),  # apart: kept
])
def test_word_polygons_are_clipped_to_their_line(rectangle, expected):
    line = ((0, 0), (10, 0), (10, 10), (0, 10))
    assert set(word_polygon(line, rectangle)) == expected
