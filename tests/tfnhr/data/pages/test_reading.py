"""Pages folders as data: lines in page and reading order with the rendered images, splits by page
(subfolders, seeded, id lists) that never share a page, every skip class counted in its own
warning, coordinates scaled to the image, and pages folders wherever a data folder is read."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from PIL import Image

from tfnhr.config.options import OptionError
from tfnhr.data.formats.hdf5 import load_hdf5_set
from tfnhr.data.pages.layout import NotLayoutError
from tfnhr.data.pages.reading import (SKIP_KINDS, Skips, find_layout_files, is_pages_folder, load_page_subset,
                                      page_examples, seeded_split, split_page_ids)
from tfnhr.data.sources import convert_to_hdf5, load_data_subset
from tfnhr.data.synthetic.pages import render_page, write_pages
from tests.helpers.page_fixtures import ALTO_MM10, TRANSKRIBUS_LINES, TRANSKRIBUS_PAGE, write_page
from tests.helpers.recorded_warnings import caught


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Unrotated synthetic pages: train 3, val 1, test 1 (PAGE 2019)."""
    folder = tmp_path_factory.mktemp("pages")
    write_pages(folder, {"train": 3, "val": 1, "test": 1}, seed=5, max_angle=0, progress=False)
    return folder


def rendered_lines(seed: int, subset: str, counts: list[int]):
    """The rendered lines of consecutive pages with ``counts`` lines each: ``[(page, line), ...]``."""
    first, out = 0, []
    for index, count in enumerate(counts):
        _, lines, _ = render_page(seed, subset, first, count, max_angle=0)
        out += [(index, line) for line in lines]
        first += count
    return out


def test_lines_come_page_by_page_in_reading_order_with_the_rendered_images(pages):
    examples, warnings = caught(lambda: list(page_examples(pages, "train")))
    assert warnings == []  # the mets.xml stubs are export companions, passed over
    counts = [sum(1 for line_id, _, _ in examples if line_id.startswith(f"s{i:04d}/")) for i in range(3)]
    expected = rendered_lines(5, "train", counts)
    assert [line_id for line_id, _, _ in examples] == [f"s{page:04d}/{line.id}" for page, line in expected]
    assert [text for _, text, _ in examples] == [line.text for _, line in expected]
    for (_, _, image), (_, line) in zip(examples, expected):
        np.testing.assert_array_equal(image, line.image)


def test_subfolders_split_by_page_and_heights_are_scaled(pages):
    data = load_page_subset(pages, "val", height=24)
    assert data.ids and all(line_id.startswith("v0000/") for line_id in data.ids)
    assert {image.shape[0] for image in data.images} == {24}
    assert load_page_subset(pages, "train", limit=2).ids == ["s0000/l0", "s0000/l1"]


def test_a_seeded_split_is_by_page_disjoint_complete_and_repeatable():
    ids = [f"p{i:03d}" for i in range(23)]
    split = seeded_split(ids, seed=4)
    assert sorted(len(split[s]) for s in split) == [2, 2, 19]
    assert set().union(*split.values()) == set(ids)
    assert sum(len(part) for part in split.values()) == len(ids)
    assert seeded_split(list(reversed(ids)), seed=4) == split
    assert seeded_split(ids, seed=5) != split
    assert [len(seeded_split(ids[:3], 0)[s]) for s in ("train", "val", "test")] == [1, 1, 1]
    with pytest.raises(OptionError, match="at least 3 pages, got 2; give split a folder") as refused:
        seeded_split(ids[:2], 0)
    assert "give --split a folder with train/valid/test page-id lists" in refused.value.for_command_line()


def test_split_choices_for_a_flat_export(tmp_path):
    """A flat folder (no subset subfolders): 'official' is seeded:0, 'seeded:N' another seed, a
    folder of page-id lists as for IAM; no page id is in two subsets."""
    paths = []
    for index in range(10):
        path = tmp_path / "export" / "page" / f"{index:04d}.xml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("<x/>")
        paths.append(path)
    folder = tmp_path / "export"
    ids = [path.stem for path in paths]
    assert split_page_ids(folder, paths, "official") == seeded_split(ids, 0)
    assert split_page_ids(folder, paths, "seeded:7") == seeded_split(ids, 7)
    lists = tmp_path / "lists"
    lists.mkdir()
    for name, members in (("train.txt", ids[:6]), ("valid.txt", ids[6:8]), ("test.lst", ids[8:])):
        (lists / name).write_text("\n".join(members) + "\n")
    assert split_page_ids(folder, paths, lists) == {"train": set(ids[:6]), "val": set(ids[6:8]), "test": set(ids[8:])}


def damaged_folder(tmp_path, pages):
    """A copy of the pages, its train subset damaged: line l0 of s0000 without text, l1 with a
    two-point polygon, l2 off the page; s0001's image deleted, s0002's garbled; s0003 a copy of
    s0002's layout on a readable image; s0004 truncated XML; an unrelated XML file."""
    folder = tmp_path / "damaged"
    shutil.copytree(pages, folder)
    xml = folder / "train" / "page" / "s0000.xml"
    text = xml.read_text()
    start = text.index('<TextLine id="l0">')
    text = text[:start] + re.sub(r"<TextEquiv>.*?</TextEquiv>", "", text[start:], count=1, flags=re.S)
    text = _replace_coords(text, "l1", "5,5 6,6")
    text = _replace_coords(text, "l2", "9000,9000 9100,9000 9100,9050 9000,9050")
    xml.write_text(text)
    (folder / "train" / "s0001.png").unlink()
    (folder / "train" / "s0002.png").write_bytes(b"not a png")
    copy = (folder / "train" / "page" / "s0002.xml").read_text().replace("s0002.png", "s0003.png")
    (folder / "train" / "page" / "s0003.xml").write_text(copy)
    shutil.copy(folder / "test" / "t0000.png", folder / "train" / "s0003.png")
    (folder / "train" / "page" / "s0004.xml").write_text(text[:300])
    (folder / "train" / "notes.xml").write_text("<notes><note>hello</note></notes>")
    return folder


def _replace_coords(text: str, line_id: str, points: str) -> str:
    start = text.index(f'<TextLine id="{line_id}">')
    coords = text.index('<Coords points="', start) + len('<Coords points="')
    return text[:coords] + points + text[text.index('"', coords):]


def test_every_skip_class_is_counted_in_its_own_warning(tmp_path, pages):
    folder = damaged_folder(tmp_path, pages)
    data, warnings = caught(load_page_subset, folder, "train")
    messages = {kind: [m for m in warnings if SKIP_KINDS[kind] in m] for kind in SKIP_KINDS}
    assert len(warnings) == 7, warnings
    for kind, count in (("no_text", 1), ("degenerate", 1), ("outside", 1), ("missing_image", 1),
                        ("unreadable_image", 1), ("invalid_layout", 1)):
        assert len(messages[kind]) == 1 and f"skipped {count} {SKIP_KINDS[kind]}" in messages[kind][0], kind
    assert len(messages["not_layout"]) == 1 and "train/notes.xml (root notes)" in messages["not_layout"][0]
    assert "s0000.xml line l0" in messages["no_text"][0] and "s0001.xml: s0001.png" in messages["missing_image"][0]
    assert "s0004.xml: not well-formed XML" in messages["invalid_layout"][0]
    # s0000 keeps its other lines and s0003 (a copy of s0002's layout on a readable image) all of its
    assert {line_id.split("/")[0] for line_id in data.ids} == {"s0000", "s0003"}


def test_unrelated_xml_is_counted_and_a_named_non_layout_file_is_an_error(tmp_path, pages):
    folder = damaged_folder(tmp_path, pages)
    skips = Skips()
    found = find_layout_files(folder, skips)
    assert skips.count("not_layout") == 1 and "notes.xml (root notes)" in skips.items["not_layout"][0]
    assert all(path.name != "mets.xml" for path in found)
    with pytest.raises(NotLayoutError, match=r"notes\.xml: neither PAGE-XML .* root element is notes"):
        find_layout_files([folder / "train" / "notes.xml"], Skips())
    with pytest.raises(FileNotFoundError, match="nope.xml: no such layout file"):
        find_layout_files([folder / "nope.xml"], Skips())
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no PAGE-XML or ALTO file"):
        find_layout_files(tmp_path / "empty", Skips())


def test_two_pages_with_one_id_are_refused(tmp_path, pages):
    shutil.copytree(pages / "train", tmp_path / "a")
    shutil.copytree(pages / "train", tmp_path / "b")
    with pytest.raises(ValueError, match="two layout files have the page id 's0000'"):
        find_layout_files(tmp_path, Skips())


def test_coordinates_are_scaled_from_the_declared_size_to_the_image(tmp_path):
    """The ALTO fixture measures in mm10 on a 2000x1500 page; its image is 600x450 px."""
    folder = tmp_path / "alto"
    write_page(folder, "scan_0007.xml", ALTO_MM10, "scan_0007.png", (600, 450))
    data = load_page_subset(folder, None)
    assert data.ids == ["scan_0007/line1", "scan_0007/line2"] and data.texts == ["over the hyphen-", "second"]
    assert data.images[0].shape == (45, 300) and data.images[1].shape == (48, 420)
    page = np.asarray(Image.open(folder / "scan_0007.png"))
    np.testing.assert_array_equal(data.images[0], page[60:105, 30:330])


def test_an_export_style_page_gives_its_transcribed_lines(tmp_path):
    folder = tmp_path / "export"
    write_page(folder / "page", "IMG_0001.xml", TRANSKRIBUS_PAGE, "../IMG_0001.png", (600, 400))
    data, warnings = caught(load_page_subset, folder, None)
    assert data.texts == [text for _, text in TRANSKRIBUS_LINES if text]
    assert len(warnings) == 1 and "skipped 1 lines without text (first: IMG_0001.xml line body_l3)" in warnings[0]


def test_pages_folders_work_wherever_a_data_folder_is_read(tmp_path, pages):
    assert is_pages_folder(pages) and not is_pages_folder(tmp_path)
    via_sources = load_data_subset(pages, "test", height=20)
    direct = load_page_subset(pages, "test", height=20)
    assert via_sources.ids == direct.ids and len(via_sources) > 0
    summary = convert_to_hdf5(pages, tmp_path / "pages.h5", height=20, progress=False)
    assert summary["kind"] == "pages"
    stored = load_hdf5_set(tmp_path / "pages.h5", "test")
    assert stored.ids == direct.ids and stored.texts == direct.texts
    for a, b in zip(stored.images, direct.images):
        np.testing.assert_array_equal(a, b)
