"""Reading text-image files and turning them into model input.

On disk: grayscale (or colour, converted) PNG/JPEG, dark ink on a light background, as in IAM.
Model input: float32 ``[H, W, 1]`` ink intensity in [0, 1] (:func:`to_ink`: ``1 - gray / 255``),
so background is 0 and padding, where any, is background; optionally scaled to a fixed height
first (:func:`scale_to_height`).
"""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError


class ImageReadError(ValueError):
    """An image file is missing, unreadable or empty; the message names the file."""


def load_gray(path: str | Path) -> np.ndarray:
    """The image at ``path`` as uint8 ``[H, W]`` gray levels (0 = black ink, 255 = white)."""
    return _read_gray(path, str(path))


def decode_gray(data: bytes, name: str = "<request body>") -> np.ndarray:
    """Encoded PNG/JPEG bytes -> uint8 ``[H, W]``; :class:`ImageReadError` naming ``name`` if not an image."""
    if not data:
        raise ImageReadError(f"{name}: the image is empty")
    return _read_gray(io.BytesIO(data), name)


def _read_gray(source: str | Path | io.BytesIO, name: str) -> np.ndarray:
    try:
        with Image.open(source) as image:
            gray = np.asarray(image.convert("L"), dtype=np.uint8)
    except FileNotFoundError as error:
        raise ImageReadError(f"{name}: no such image file") from error
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
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
