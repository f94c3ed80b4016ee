"""tfnhr.data.images: every image mode read as it looks (against the NumPy reference of
tests/helpers/image_modes.py), values scaled and never clipped, one-line errors for what has no
gray levels."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from tests.helpers.image_modes import HEIGHT, WIDTH, cases, gradient
from tfnhr.data.images import ImageReadError, decode_gray, load_gray

CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_every_mode_reads_as_it_looks(case):
    gray = decode_gray(case.data, case.name)
    assert gray.dtype == np.uint8 and gray.shape == case.expected.shape
    difference = np.abs(gray.astype(int) - case.expected)
    if case.lossy:  # JPEG: the reference is the image before compression
        assert difference.max() <= 6 and difference.mean() <= 1.5
    else:
        assert difference.max() <= 1


def test_a_16_bit_line_keeps_its_ink():
    """A dark line on a light page in 16 bits reads with the 8-bit image's ink, not clipped to white."""
    gray = np.full((HEIGHT, WIDTH), 230, np.uint8)
    gray[4:7, 2:15] = 20
    deep = gray.astype(np.uint16) * 257
    buffer = io.BytesIO()
    Image.fromarray(deep).save(buffer, "PNG")
    np.testing.assert_array_equal(decode_gray(buffer.getvalue()), gray)


def test_a_file_reads_as_its_bytes(tmp_path):
    path = tmp_path / "line.png"
    path.write_bytes(CASES[3].data)  # 16-bit gray
    np.testing.assert_array_equal(load_gray(path), decode_gray(CASES[3].data))


def _tiff(*frames: Image.Image) -> bytes:
    buffer = io.BytesIO()
    frames[0].save(buffer, "TIFF", save_all=True, append_images=list(frames[1:]))
    return buffer.getvalue()


def test_a_multi_page_tiff_is_refused_in_one_line():
    page = Image.fromarray(gradient("page"))
    with pytest.raises(ImageReadError, match=r"^scan.tif: a multi-page image \(3 pages\): save each page as its own file$"):
        decode_gray(_tiff(page, page, page), "scan.tif")
    np.testing.assert_array_equal(decode_gray(_tiff(page)), np.asarray(page))


@pytest.mark.parametrize("values, message", [
    (np.full((4, 5), 1.5, np.float32), "floating-point samples outside"),
    (np.full((4, 5), 70000, np.int32), "32-bit samples outside 0..65535"),
])
def test_samples_without_gray_levels_are_refused(values, message):
    with pytest.raises(ImageReadError, match=f"^deep.tif: {message}"):
        decode_gray(_tiff(Image.fromarray(values)), "deep.tif")


def test_float_samples_in_the_unit_range_scale_by_255():
    values = np.linspace(0, 1, 20, dtype=np.float32).reshape(4, 5)
    np.testing.assert_array_equal(decode_gray(_tiff(Image.fromarray(values))), np.round(values * 255).astype(np.uint8))
