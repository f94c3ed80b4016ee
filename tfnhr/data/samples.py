"""The record every data source yields: one image file and its transcription."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Sample:
    """One line or word: ``id`` (e.g. ``a01-000u-00``), ``text`` (spaces between words),
    ``image_path`` (a grayscale image file, dark ink on a light background)."""

    id: str
    text: str
    image_path: str
