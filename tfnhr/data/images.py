"""Reading text-image files and turning them into model input.

On disk: any image Pillow reads (PNG, JPEG, TIFF, WebP, GIF, BMP, ...), dark ink on a light
background, as in IAM. Every path of the project (training, evaluation, ``recognize``, the service,
pages) reads files through :func:`load_gray` / :func:`decode_gray`, which give the gray levels the
image shows on screen (:func:`gray_levels`). Model input: float32 ``[H, W, 1]`` ink intensity in
[0, 1] (:func:`to_ink`: ``1 - gray / 255``), so background is 0 and padding, where any, is
background; optionally scaled to a fixed height first (:func:`scale_to_height`).
"""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError


class ImageReadError(ValueError):
    """An image file is missing, unreadable, empty or of a kind that has no gray levels; the
    message names the file."""


def load_gray(path: str | Path) -> np.ndarray:
    """The image at ``path`` as uint8 ``[H, W]`` gray levels (0 = black ink, 255 = white), as
    :func:`gray_levels` defines them."""
    return _read_gray(path, str(path))


def decode_gray(data: bytes, name: str = "<request body>") -> np.ndarray:
    """Encoded image bytes -> uint8 ``[H, W]`` (:func:`gray_levels`); :class:`ImageReadError`
    naming ``name`` if not an image."""
    if not data:
        raise ImageReadError(f"{name}: the image is empty")
    return _read_gray(io.BytesIO(data), name)


LUMA_WEIGHTS = (19595, 38470, 7471)
"""ITU-R 601-2 luma in 16-bit fixed point (sum 65536): gray = (19595 R + 38470 G + 7471 B + 32768) >> 16,
Pillow's own RGB -> L conversion and the export's (:func:`tfnhr.serving.graph_images.decode_gray`)."""


def gray_levels(image: Image.Image, name: str = "image") -> np.ndarray:
    """A Pillow image -> uint8 ``[H, W]`` gray levels as the image looks on a white page.

    - EXIF orientation applied (a photo taken sideways reads upright);
    - 16-bit samples (gray, RGB, 16-bit TIFF and PNG) scaled to 8 bits by their high byte, not
      clipped (``v >> 8``, within one level of ``round(v / 257)``; libpng's reduction, which the
      export uses); 32-bit integer samples the same when they lie in 0..65535, floating-point
      samples in [0, 1] scaled by 255;
    - 1-bit black and white as 0 and 255; palette, CMYK, YCbCr and other colour modes through
      Pillow's conversion to RGB, then the luma of :data:`LUMA_WEIGHTS`;
    - the first frame of an animation (GIF, APNG, WebP) and of a camera's multi-picture JPEG;
    - transparency (an alpha channel or a palette's transparent entry) composited over white:
      ``(gray * alpha + 255 * (255 - alpha) + 127) // 255``.

    Raises:
      ImageReadError: a multi-page TIFF (one page per file is needed), or samples that have no
        gray-level meaning (negative or above 16 bits, floats outside [0, 1]).
    """
    pages = getattr(image, "n_frames", 1)
    if image.format == "TIFF" and pages > 1:
        raise ImageReadError(f"{name}: a multi-page image ({pages} pages): save each page as its own file")
    image = ImageOps.exif_transpose(image)
    mode = image.mode
    if mode.startswith("I") or mode == "F":
        return _high_range_gray(np.asarray(image), name)
    transparent = "A" in mode.upper() or "transparency" in image.info
    if mode in ("1", "L") and not transparent:
        return np.asarray(image.convert("L"), dtype=np.uint8)
    rgba = np.asarray(image.convert("RGBA" if transparent else "RGB"), dtype=np.int64)
    red, green, blue = LUMA_WEIGHTS
    gray = (rgba[..., 0] * red + rgba[..., 1] * green + rgba[..., 2] * blue + 32768) >> 16
    if transparent:
        alpha = rgba[..., 3]
        gray = (gray * alpha + 255 * (255 - alpha) + 127) // 255
    return gray.astype(np.uint8)


def _high_range_gray(values: np.ndarray, name: str) -> np.ndarray:
    """Gray samples of more than 8 bits (Pillow's ``I;16*``, ``I`` and ``F`` modes) -> uint8."""
    if values.dtype.kind == "f":
        if values.size and (np.nanmin(values) < 0 or np.nanmax(values) > 1 or np.isnan(values).any()):
            raise ImageReadError(f"{name}: floating-point samples outside [0, 1] have no gray levels: "
                                 "save the image with 8- or 16-bit samples")
        return np.round(values * 255).astype(np.uint8)
    if values.size and (values.min() < 0 or values.max() > 65535):
        raise ImageReadError(f"{name}: 32-bit samples outside 0..65535 have no gray levels: "
                             "save the image with 8- or 16-bit samples")
    return (values.astype(np.uint32) >> 8).astype(np.uint8)


def _read_gray(source: str | Path | io.BytesIO, name: str) -> np.ndarray:
    try:
        with Image.open(source) as image:
            gray = gray_levels(image, name)
    except FileNotFoundError as error:
        raise ImageReadError(f"{name}: no such image file") from error
    except IsADirectoryError as error:
        raise ImageReadError(f"{name}: a folder, not an image file") from error
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        if isinstance(error, ImageReadError):
            raise
        # PIL names a file by its path and an in-memory source by its repr: the message names it already
        reason = str(error).replace(f" {str(source)!r}", "").replace(f" {source!r}", "")
        raise ImageReadError(f"{name}: not a readable image ({reason})") from error
    if gray.size == 0:
        raise ImageReadError(f"{name}: the image is empty")
    return gray


def scale_to_height(gray: np.ndarray, height: int | None) -> np.ndarray:
    """uint8 ``[H, W]`` gray -> the same image ``height`` rows high, aspect ratio kept (bilinear;
    width at least 1). ``None`` or the same height returns ``gray`` unchanged."""
    if gray.ndim != 2 or gray.size == 0:
        raise ValueError(f"expected a non-empty [H, W] gray image, got shape {gray.shape}")
    if height is None or height == gray.shape[0]:
        return gray
    width = max(1, round(gray.shape[1] * height / gray.shape[0]))
    return np.asarray(Image.fromarray(gray).resize((width, height), Image.BILINEAR))


def scale_width(gray: np.ndarray, factor: float) -> np.ndarray:
    """``gray`` (uint8 ``[H, W]``) resized to ``[H, max(1, round(W * factor))]`` (area averaging
    when narrowing, bilinear when widening); the image itself when ``factor`` is 1."""
    if factor == 1.0:
        return gray
    width = max(1, round(gray.shape[1] * factor))
    return cv2.resize(gray, (width, gray.shape[0]), interpolation=cv2.INTER_AREA if factor < 1 else cv2.INTER_LINEAR)


def to_ink(gray: np.ndarray) -> np.ndarray:
    """uint8 ``[H, W]`` gray -> float32 ``[H, W, 1]`` ink in [0, 1] (``1 - gray / 255``)."""
    return (1.0 - gray.astype(np.float32) / 255.0)[..., None]


MIN_READABLE_HEIGHT = 8
"""Fewer rows (px) than this hold no legible handwriting, whatever the model's input height."""
MIN_READABLE_WIDTH = 4
"""Fewer columns (px) than this hold no legible handwriting."""


def unreadable_reason(gray: np.ndarray) -> str | None:
    """Why a gray ``[H, W]`` image is too small to read (a model would only guess), or ``None``
    if it is at least :data:`MIN_READABLE_HEIGHT` x :data:`MIN_READABLE_WIDTH` px."""
    height, width = gray.shape[:2]
    if height < MIN_READABLE_HEIGHT or width < MIN_READABLE_WIDTH:
        return (f"too small to read: {width}x{height} px (width x height; at least "
                f"{MIN_READABLE_WIDTH}x{MIN_READABLE_HEIGHT} px)")
    return None
