"""Image files of every mode a scanner or a camera writes, each with the gray levels it shows by an
independent NumPy reference (luma by its floating-point ITU-R 601-2 weights, 16 bits by
``round(v / 257)``, alpha composited over white, EXIF orientation by NumPy's flips and turns)."""

from __future__ import annotations

import io
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image

HEIGHT, WIDTH = 11, 17


@dataclass(frozen=True)
class ModeCase:
    """One encoded image and the gray levels a person sees in it."""
    name: str
    data: bytes
    expected: np.ndarray  # uint8 [H, W]
    lossy: bool = False  # JPEG: the reference is the source before compression
    graph_reads: bool = True  # TensorFlow's decoders read the format (not TIFF, WebP)
    graph_refuses: str | None = None  # the export's error for a file it would read differently


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(sum(map(ord, name)))


def _encode(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def luma(rgb: np.ndarray) -> np.ndarray:
    """float ``[..., 3]`` RGB -> float gray by ITU-R 601-2."""
    return rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114


def over_white(gray: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    return gray * alpha / 255 + 255 * (1 - alpha / 255)


def _u8(values: np.ndarray) -> np.ndarray:
    return np.clip(np.round(values), 0, 255).astype(np.uint8)


def gradient(name: str, channels: int = 0, dtype=np.uint8) -> np.ndarray:
    """A text-like test image: random samples over the full range of ``dtype``."""
    shape = (HEIGHT, WIDTH, channels) if channels else (HEIGHT, WIDTH)
    return _rng(name).integers(0, np.iinfo(dtype).max + 1, shape, dtype=np.int64).astype(dtype)


EXIF_TURNS = {
    1: lambda a: a,
    2: lambda a: a[:, ::-1],
    3: lambda a: a[::-1, ::-1],
    4: lambda a: a[::-1, :],
    5: lambda a: a.T,
    6: lambda a: np.rot90(a, -1),
    7: lambda a: np.rot90(a, 2).T,
    8: lambda a: np.rot90(a, 1),
}
"""EXIF orientation -> how the stored pixels turn upright (TIFF/EXIF 2.3, tag 0x0112)."""


def _with_orientation(image: Image.Image, fmt: str, orientation: int, **options) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return _encode(image, fmt, exif=exif.tobytes(), **options)


def cases() -> list[ModeCase]:
    """The table: one case per mode, format and property."""
    table = []
    gray = gradient("L")
    table.append(ModeCase("8-bit gray PNG", _encode(Image.fromarray(gray), "PNG"), gray))
    bits = (gradient("1") > 127).astype(np.uint8) * 255
    table.append(ModeCase("1-bit PNG", _encode(Image.fromarray(bits).convert("1"), "PNG"), bits))
    table.append(ModeCase("1-bit TIFF", _encode(Image.fromarray(bits).convert("1"), "TIFF"), bits, graph_reads=False))
    deep = gradient("I16", dtype=np.uint16)
    table.append(ModeCase("16-bit gray PNG", _encode(Image.fromarray(deep), "PNG"), _u8(deep / 257)))
    table.append(ModeCase("16-bit gray TIFF", _encode(Image.fromarray(deep), "TIFF"), _u8(deep / 257),
                          graph_reads=False))
    rgb = gradient("RGB", 3)
    table.append(ModeCase("RGB PNG", _encode(Image.fromarray(rgb), "PNG"), _u8(luma(rgb.astype(float)))))
    table.append(ModeCase("RGB BMP", _encode(Image.fromarray(rgb), "BMP"), _u8(luma(rgb.astype(float)))))
    table.append(ModeCase("RGB TIFF", _encode(Image.fromarray(rgb), "TIFF"), _u8(luma(rgb.astype(float))),
                          graph_reads=False))
    table.append(ModeCase("RGB WebP (lossless)", _encode(Image.fromarray(rgb), "WEBP", lossless=True),
                          _u8(luma(rgb.astype(float))), graph_reads=False))
    deep_rgb = gradient("RGB16", 3, np.uint16)
    ok, png48 = cv2.imencode(".png", np.ascontiguousarray(deep_rgb[..., ::-1]))
    assert ok
    table.append(ModeCase("48-bit RGB PNG", png48.tobytes(), _u8(luma(deep_rgb / 257))))
    rgba = gradient("RGBA", 4)
    table.append(ModeCase("RGBA PNG", _encode(Image.fromarray(rgba), "PNG"),
                          _u8(over_white(luma(rgba[..., :3].astype(float)), rgba[..., 3]))))
    la = gradient("LA", 2)
    table.append(ModeCase("gray + alpha PNG", _encode(Image.fromarray(la, "LA"), "PNG"),
                          _u8(over_white(la[..., 0].astype(float), la[..., 1]))))
    palette = gradient("palette", 3)[:4].reshape(-1, 3)[:16]  # 16 colours
    indices = _rng("indices").integers(0, 16, (HEIGHT, WIDTH)).astype(np.uint8)
    indexed = Image.fromarray(indices, "P")
    indexed.putpalette(palette.ravel().tolist())
    shown = luma(palette[indices].astype(float))
    table.append(ModeCase("palette PNG", _encode(indexed, "PNG"), _u8(shown)))
    table.append(ModeCase("palette GIF", _encode(indexed, "GIF"), _u8(shown)))
    transparent = np.where(indices == 3, 255.0, shown)
    table.append(ModeCase("palette PNG, one colour transparent", _encode(indexed, "PNG", transparency=3),
                          _u8(transparent)))
    table.append(ModeCase("palette GIF, one colour transparent", _encode(indexed, "GIF", transparency=3),
                          _u8(transparent), graph_refuses="GIF with a transparent colour"))
    cmyk = gradient("CMYK", 4)
    cmyk_rgb = (255 - cmyk[..., :3].astype(float)) * (255 - cmyk[..., 3:].astype(float)) / 255
    table.append(ModeCase("CMYK TIFF", _encode(Image.fromarray(cmyk, "CMYK"), "TIFF"), _u8(luma(cmyk_rgb)),
                          graph_reads=False))
    table.append(ModeCase("CMYK JPEG", _encode(Image.fromarray(cmyk, "CMYK"), "JPEG", quality=95),
                          _u8(luma(cmyk_rgb)), lossy=True, graph_refuses="CMYK JPEG"))
    smooth = _u8(np.add.outer(np.linspace(40, 220, HEIGHT), np.linspace(0, 30, WIDTH)))
    table.append(ModeCase("gray JPEG", _encode(Image.fromarray(smooth), "JPEG", quality=95), smooth, lossy=True))
    smooth_rgb = np.stack([smooth, smooth[::-1], 255 - smooth], axis=-1)
    table.append(ModeCase("RGB JPEG", _encode(Image.fromarray(smooth_rgb), "JPEG", quality=95),
                          _u8(luma(smooth_rgb.astype(float))), lossy=True))
    for orientation, turn in EXIF_TURNS.items():
        table.append(ModeCase(f"PNG, EXIF orientation {orientation}",
                              _with_orientation(Image.fromarray(gray), "PNG", orientation),
                              np.ascontiguousarray(turn(gray))))
        table.append(ModeCase(f"JPEG, EXIF orientation {orientation}",
                              _with_orientation(Image.fromarray(smooth), "JPEG", orientation, quality=95),
                              np.ascontiguousarray(turn(smooth)), lossy=True))
    return table
