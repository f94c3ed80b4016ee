"""What a ``POST /recognize`` body holds: named encoded images, checked against the limits.

A body is either one raw image (``Content-Type: image/*``, ``application/octet-stream`` or no
content type) or ``multipart/form-data`` whose file parts (parts with a ``filename``) are the
images; other form fields are ignored. Problems raise :class:`RequestError` carrying the HTTP
status the service answers with.
"""

from __future__ import annotations

import io
from email import policy
from email.message import Message
from email.parser import BytesParser

import numpy as np
from PIL import Image, UnidentifiedImageError

from tfnhr.data.images import ImageReadError, decode_gray

RAW_BODY_NAME = "request body"
"""The name a raw (non-multipart) image goes by in error messages."""


class RequestError(Exception):
    """A request the service refuses: ``status`` (HTTP 4xx) and a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def body_kind(content_type: str | None) -> str:
    """``"image"`` for a raw image body (``image/*``, ``application/octet-stream`` or no
    ``Content-Type``), ``"multipart"`` for ``multipart/form-data``; :class:`RequestError` 415
    for anything else."""
    if content_type is None:
        return "image"
    header = Message()
    header["Content-Type"] = content_type
    kind = header.get_content_type()
    if kind == "application/octet-stream" or kind.startswith("image/"):
        return "image"
    if kind == "multipart/form-data":
        return "multipart"
    raise RequestError(415, f"unsupported content type {kind}: send an image or multipart/form-data")


def image_parts(body: bytes, content_type: str | None) -> list[tuple[str, bytes]]:
    """``(name, encoded image)`` pairs of a request body, in order. A raw image is named
    :data:`RAW_BODY_NAME`, a multipart file by its ``filename``. :class:`RequestError` 415 for
    other content types (:func:`body_kind`), 400 for a malformed multipart body or one without
    file parts."""
    if body_kind(content_type) == "image":
        return [(RAW_BODY_NAME, body)]
    message = BytesParser(policy=policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
    if message.get_boundary() is None or message.defects or not message.is_multipart():
        raise RequestError(400, "malformed multipart/form-data body")
    files = [(part.get_filename(), part.get_payload(decode=True)) for part in message.iter_parts()
             if part.get_filename() is not None]
    if not files:
        raise RequestError(400, "the multipart/form-data body has no file parts")
    return files


def read_gray(data: bytes, name: str, max_height: int, max_width: int) -> np.ndarray:
    """Encoded image -> uint8 ``[H, W]`` gray levels. The size (pixels) is read from the image
    header before any pixel is decoded: :class:`RequestError` 413 if it exceeds ``max_height``
    x ``max_width``; 400 if ``data`` is empty or not an image."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except Image.DecompressionBombError:  # PIL's backstop, far above the limit: same answer
        raise RequestError(413, f"{name}: the image has more pixels than the limit of {max_width}x{max_height} px "
                                f"(width x height)") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        width = height = 0  # not an image (or empty): decode_gray below says so
    if height > max_height or width > max_width:
        raise RequestError(413, f"{name}: {width}x{height} px is larger than the limit of "
                                f"{max_width}x{max_height} px (width x height)")
    try:
        return decode_gray(data, name)
    except ImageReadError as error:
        raise RequestError(400, str(error)) from error
