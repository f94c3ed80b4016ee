"""Hand-written PAGE-XML and ALTO files in the style real exports have, with their page images.

* :data:`TRANSKRIBUS_PAGE` (PAGE 2013, a Transkribus-style export): a reading order that differs
  from document order, a region no reading order lists, a region nested in a table region,
  ``TextEquiv`` at region, line and word level, two indexed line ``TextEquiv``s, a line with
  words only, a line with no text, ``TextStyle`` after the text, comments and custom attributes.
  :data:`TRANSKRIBUS_LINES` lists its lines in reading order as ``(id, text)``.
* :data:`ALTO_MM10` (ALTO v3 in ``mm10`` units, ISO-8859-1 encoded, a non-ASCII attribute): a
  hyphenated line (``HYP``), a line with an old-style ``x y x y`` polygon and a one-value
  ``BASELINE``. Its page is 2000 x 1500 mm10 for a 600 x 450 px image.
* :data:`PAGE_2010_POINTS` (PAGE 2010): ``Coords`` as ``Point`` children.

:func:`without_line_text` gives what must not change when recognized text is written into a file.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
from lxml import etree
from PIL import Image

TRANSKRIBUS_PAGE = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<!-- exported by a transcription platform -->
<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2013-07-15" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://schema.primaresearch.org/PAGE/gts/pagecontent/2013-07-15 http://schema.primaresearch.org/PAGE/gts/pagecontent/2013-07-15/pagecontent.xsd">
    <Metadata>
        <Creator>prov=platform:name=htr-model</Creator>
        <Created>2021-03-01T10:00:00.000+01:00</Created>
        <LastChange>2021-03-02T11:00:00.000+01:00</LastChange>
        <TranskribusMetadata docId="1" pageId="2" pageNr="1" status="GT"/>
    </Metadata>
    <Page imageFilename="IMG_0001.png" imageWidth="600" imageHeight="400">
        <ReadingOrder>
            <OrderedGroup id="ro_1" caption="Regions reading order">
                <RegionRefIndexed index="1" regionRef="r_body"/>
                <RegionRefIndexed index="0" regionRef="r_head"/>
                <RegionRefIndexed index="2" regionRef="t_table"/>
            </OrderedGroup>
        </ReadingOrder>
        <TextRegion id="r_margin" custom="structure {type:marginalia;}">
            <Coords points="585,100 598,100 598,300 585,300"/>
            <TextLine id="margin_l1">
                <Coords points="585,100 598,100 598,300 585,300"/>
                <TextEquiv><Unicode>margin note</Unicode></TextEquiv>
            </TextLine>
        </TextRegion>
        <TextRegion id="r_body" custom="readingOrder {index:1;} structure {type:paragraph;}">
            <Coords points="20,100 580,100 580,210 20,210"/>
            <TextLine id="body_l1" custom="readingOrder {index:0;}">
                <Coords points="30,110 570,110 570,145 30,145"/>
                <Baseline points="30,138 570,138"/>
                <Word id="body_l1_w1">
                    <Coords points="30,110 120,110 120,145 30,145"/>
                    <TextEquiv><Unicode>first</Unicode></TextEquiv>
                </Word>
                <TextEquiv index="1"><Unicode>an alternative reading</Unicode></TextEquiv>
                <TextEquiv index="0" conf="0.9"><Unicode>first body line</Unicode></TextEquiv>
                <TextStyle fontSize="12.0"/>
            </TextLine>
            <TextLine id="body_l2" custom="readingOrder {index:1;}">
                <Coords points="30,150 570,150 570,185 30,185"/>
                <Baseline points="30,180 570,180"/>
                <Word id="body_l2_w1">
                    <Coords points="30,150 200,150 200,185 30,185"/>
                    <TextEquiv><Unicode>second</Unicode></TextEquiv>
                </Word>
                <Word id="body_l2_w2">
                    <Coords points="210,150 400,150 400,185 210,185"/>
                    <TextEquiv><Unicode>line</Unicode></TextEquiv>
                </Word>
            </TextLine>
            <TextLine id="body_l3">
                <Coords points="30,188 570,188 570,208 30,208"/>
            </TextLine>
            <TextEquiv><Unicode>first body line
second line</Unicode></TextEquiv>
        </TextRegion>
        <TextRegion id="r_head" type="heading">
            <Coords points="20,20 580,20 580,80 20,80"/>
            <TextLine id="head_l1">
                <Coords points="100,30 500,30 500,70 100,70"/>
                <Baseline points="100,62 500,62"/>
                <TextEquiv>
                    <Unicode>  A   Heading
</Unicode>
                </TextEquiv>
            </TextLine>
        </TextRegion>
        <TableRegion id="t_table">
            <Coords points="20,220 580,220 580,380 20,380"/>
            <TextRegion id="t_cell">
                <Coords points="30,230 570,230 570,300 30,300"/>
                <TextLine id="cell_l1">
                    <Coords points="40,240 560,240 560,280 40,280"/>
                    <Baseline points="40,272 560,272"/>
                    <TextEquiv><Unicode>table cell text</Unicode></TextEquiv>
                    <UserDefined><UserAttribute name="note" value="kept"/></UserDefined>
                </TextLine>
            </TextRegion>
        </TableRegion>
    </Page>
</PcGts>
"""

TRANSKRIBUS_LINES = [("head_l1", "A Heading"), ("body_l1", "first body line"), ("body_l2", "second line"),
                     ("body_l3", None), ("cell_l1", "table cell text"), ("margin_l1", "margin note")]
"""The lines of :data:`TRANSKRIBUS_PAGE` in reading order, ``(id, text)`` (``None``: no text)."""

ALTO_MM10 = """<?xml version="1.0" encoding="ISO-8859-1"?>
<alto xmlns="http://www.loc.gov/standards/alto/ns-v3#" xmlns:xlink="http://www.w3.org/1999/xlink">
  <Description>
    <MeasurementUnit>mm10</MeasurementUnit>
    <sourceImageInformation>
      <fileName>scan_0007.png</fileName>
    </sourceImageInformation>
    <OCRProcessing ID="proc1">
      <ocrProcessingStep>
        <processingSoftware><softwareName>Präzisions-OCR</softwareName></processingSoftware>
      </ocrProcessingStep>
    </OCRProcessing>
  </Description>
  <Layout>
    <Page ID="page1" PHYSICAL_IMG_NR="7" WIDTH="2000" HEIGHT="1500">
      <PrintSpace HPOS="0" VPOS="0" WIDTH="2000" HEIGHT="1500">
        <TextBlock ID="block1">
          <TextLine ID="line1" HPOS="100" VPOS="200" WIDTH="1000" HEIGHT="150" BASELINE="330">
            <String ID="s1" CONTENT="over" HPOS="100" VPOS="200" WIDTH="300" HEIGHT="150"/>
            <SP/>
            <String ID="s2" CONTENT="the" HPOS="420" VPOS="200" WIDTH="200" HEIGHT="150"/>
            <SP/>
            <String ID="s3" CONTENT="hyphen" HPOS="640" VPOS="200" WIDTH="460" HEIGHT="150"/>
            <HYP CONTENT="-"/>
          </TextLine>
          <TextLine ID="line2" HPOS="100" VPOS="400" WIDTH="1400" HEIGHT="160">
            <Shape><Polygon POINTS="100 400 1500 400 1500 560 100 560"/></Shape>
            <String CONTENT="second" WC="0.5"/>
          </TextLine>
        </TextBlock>
      </PrintSpace>
    </Page>
  </Layout>
</alto>
"""

PAGE_2010_POINTS = """<?xml version="1.0" encoding="UTF-8"?>
<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2010-03-19">
  <Page imageFilename="old.png" imageWidth="300" imageHeight="200">
    <TextRegion id="r1">
      <Coords><Point x="10" y="10"/><Point x="290" y="10"/><Point x="290" y="190"/><Point x="10" y="190"/></Coords>
      <TextLine id="l1">
        <Coords><Point x="20" y="20"/><Point x="280" y="20"/><Point x="280" y="60"/><Point x="20" y="60"/></Coords>
        <TextEquiv><Unicode>old schema</Unicode></TextEquiv>
      </TextLine>
    </TextRegion>
  </Page>
</PcGts>
"""


def write_page(folder: Path, name: str, xml: str, image_name: str, size: tuple[int, int], seed: int = 0) -> Path:
    """Write ``xml`` as ``folder/name`` (in the encoding its declaration names) and a noisy light
    page image ``size`` ``(width, height)`` as ``folder/image_name``; returns the XML path."""
    folder.mkdir(parents=True, exist_ok=True)
    encoding = "iso-8859-1" if 'encoding="ISO-8859-1"' in xml else "utf-8"
    path = folder / name
    path.write_bytes(xml.encode(encoding))
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(150, 256, size=(size[1], size[0]), dtype=np.uint8)).save(folder / image_name)
    return path


TEXT_CHILDREN = {"page": ("TextEquiv", "Word"), "alto": ("String", "SP", "HYP")}


def without_line_text(tree, fmt: str) -> bytes:
    """The document's canonical form with every TextLine's text children removed and the
    whitespace between a TextLine's children dropped (writing re-indents a line's content)."""
    tree = copy.deepcopy(tree)
    for line in tree.iter("{*}TextLine"):
        for child in [c for c in line if etree.QName(c).localname in TEXT_CHILDREN[fmt]]:
            line.remove(child)
        for element in line.iter():
            if element is not line and element.tail is not None and not element.tail.strip():
                element.tail = None
            if len(element) and element.text is not None and not element.text.strip():
                element.text = None
    return etree.tostring(tree, method="c14n")
