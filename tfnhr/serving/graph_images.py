"""Image files to gray levels inside a TensorFlow graph, as :func:`tfnhr.data.images.gray_levels`
reads them in Python (within one gray level), for the export that runs without Python's tfnhr.

What the graph reads: PNG (1- to 16-bit gray, RGB, palette, with or without alpha), JPEG (gray and
RGB, decoded with the integer-accurate inverse DCT, as libjpeg's default in Pillow), BMP, and the
first frame of a GIF without transparency. EXIF orientation is applied from a JPEG's APP1 segment and
a PNG's ``eXIf`` chunk. A CMYK JPEG or a GIF with a transparent colour fails with an error that
says so (TensorFlow's decoders convert them differently from Pillow); TIFF and WebP are not read by
TensorFlow's decoders at all.
"""

from __future__ import annotations

import tensorflow as tf

from tfnhr.data.images import LUMA_WEIGHTS

_ORIENTATION_TAG = 0x0112
_MAX_SEGMENTS = 64
"""Header segments (JPEG) or chunks (PNG) looked at for EXIF data before the image data."""
HEADER_BYTES = 1 << 17
"""Bytes at the start of a file searched for its header fields and EXIF data (a JPEG's APP1
segment is at most 64 KiB and comes before the image data, as a PNG's ``eXIf`` chunk should)."""


def decode_gray(data: tf.Tensor) -> tf.Tensor:
    """Encoded image bytes (scalar string) -> uint8 ``[H, W]`` gray: 16-bit samples by their high
    byte, colour to gray with the fixed-point luma of :data:`tfnhr.data.images.LUMA_WEIGHTS`,
    alpha composited over white, the EXIF orientation applied."""
    raw = tf.io.decode_raw(tf.strings.substr(data, 0, HEADER_BYTES), tf.uint8)
    is_jpeg = tf.io.is_jpeg(data)
    is_png = tf.equal(tf.strings.substr(data, 0, 4), b"\x89PNG")
    is_gif = tf.equal(tf.strings.substr(data, 0, 3), b"GIF")
    no_header = {"exif": tf.constant(-1), "components": tf.constant(0)}
    header = tf.cond(is_jpeg, lambda: _jpeg_header(raw), lambda: no_header)
    tf.debugging.Assert(tf.logical_not(is_jpeg & tf.equal(header["components"], 4)),
                        ["a CMYK JPEG: save the image as RGB or gray to read it here"])
    tf.debugging.Assert(tf.logical_not(tf.cond(is_gif, lambda: _gif_with_transparency(raw), lambda: False)),
                        ["a GIF with a transparent colour: save the image as PNG to read it here"])
    image = tf.cond(
        is_jpeg,
        lambda: tf.io.decode_jpeg(data, channels=0, dct_method="INTEGER_ACCURATE"),
        lambda: tf.io.decode_image(data, channels=0, dtype=tf.uint8, expand_animations=False))
    image.set_shape([None, None, None])
    gray = _composite_gray(image)
    exif = tf.cond(is_png, lambda: _png_exif(raw), lambda: header["exif"])
    orientation = tf.cond(exif >= 0, lambda: _exif_orientation(raw, exif), lambda: tf.constant(1))
    # float32 turns: oneDNN transposes only floats without a warning line on CPUs lacking AVX-512
    return tf.cond(tf.equal(orientation, 1), lambda: gray,
                   lambda: tf.cast(_oriented(tf.cast(gray, tf.float32), orientation), tf.uint8))


def _composite_gray(image: tf.Tensor) -> tf.Tensor:
    """uint8 ``[H, W, C]`` (C = 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA) -> uint8 ``[H, W]`` gray levels."""
    red, green, blue = LUMA_WEIGHTS

    def luma(channels):
        return tf.bitwise.right_shift(channels[..., 0] * red + channels[..., 1] * green + channels[..., 2] * blue
                                      + 32768, 16)

    def over_white(gray, alpha):
        return tf.cast((gray * alpha + 255 * (255 - alpha) + 127) // 255, tf.uint8)

    def wide():
        return tf.cast(image, tf.int32)

    return tf.switch_case(tf.shape(image)[2] - 1, [
        lambda: image[..., 0],
        lambda: over_white(wide()[..., 0], wide()[..., 1]),
        lambda: tf.cast(luma(wide()), tf.uint8),
        lambda: over_white(luma(wide()), wide()[..., 3]),
    ])


def _reader(raw: tf.Tensor):
    """Bounds-safe big-endian readers of ``raw`` at int32 offsets (scalars or vectors; bytes
    past the end read as 0)."""
    padded = tf.cast(tf.concat([raw, tf.zeros([8], tf.uint8)], 0), tf.int32)
    last = tf.size(padded) - 1

    def byte(offset):
        return tf.gather(padded, tf.clip_by_value(offset, 0, last))

    def big16(offset):
        return byte(offset) * 256 + byte(offset + 1)

    return byte, big16


def _jpeg_header(raw: tf.Tensor) -> dict[str, tf.Tensor]:
    """A JPEG's header segments walked up to the image data: ``exif`` (int32 offset of the TIFF
    header in the APP1 Exif segment, -1 if none) and ``components`` (colour channels of the frame,
    0 if not found)."""
    byte, big16 = _reader(raw)
    size = tf.size(raw)

    def more(step, offset, exif, components):
        marker = byte(offset + 1)
        return ((step < _MAX_SEGMENTS) & (offset + 4 <= size) & tf.equal(byte(offset), 0xFF)
                & tf.not_equal(marker, 0xDA) & tf.not_equal(marker, 0xD9))

    def segment(step, offset, exif, components):
        marker = byte(offset + 1)
        is_exif = (tf.equal(marker, 0xE1) & tf.equal(big16(offset + 4), 0x4578) & tf.equal(big16(offset + 6), 0x6966)
                   & tf.equal(big16(offset + 8), 0))  # "Exif\0\0"
        is_frame = (marker >= 0xC0) & (marker <= 0xCF) & tf.not_equal(marker, 0xC4) & tf.not_equal(marker, 0xC8) \
            & tf.not_equal(marker, 0xCC)
        exif = tf.where(is_exif & (exif < 0), offset + 10, exif)
        components = tf.where(is_frame, byte(offset + 9), components)
        return step + 1, offset + 2 + big16(offset + 2), exif, components

    _, _, exif, components = tf.while_loop(more, segment, (0, tf.constant(2), tf.constant(-1), tf.constant(0)))
    return {"exif": exif, "components": components}


def _png_exif(raw: tf.Tensor) -> tf.Tensor:
    """int32: offset of the TIFF header in a PNG's ``eXIf`` chunk, -1 if none (``raw`` starts a PNG)."""
    _, big16 = _reader(raw)
    size = tf.size(raw)

    def more(step, offset, exif):
        return (step < _MAX_SEGMENTS) & (offset + 8 <= size) & (exif < 0)

    def chunk(step, offset, exif):
        length = big16(offset) * 65536 + big16(offset + 2)
        is_exif = tf.equal(big16(offset + 4), 0x6558) & tf.equal(big16(offset + 6), 0x4966)  # "eXIf"
        return step + 1, offset + 12 + length, tf.where(is_exif, offset + 8, exif)

    _, _, exif = tf.while_loop(more, chunk, (0, tf.constant(8), tf.constant(-1)))
    return exif


def _gif_with_transparency(raw: tf.Tensor) -> tf.Tensor:
    """bool: the GIF that ``raw`` starts has a graphic control extension before its first image
    that marks a transparent colour."""
    byte, _ = _reader(raw)
    size = tf.size(raw)
    packed = byte(10)
    colour_table = tf.where(tf.equal(tf.bitwise.bitwise_and(packed, 0x80), 0), 0,
                            3 * tf.bitwise.left_shift(2, tf.bitwise.bitwise_and(packed, 7)))
    start = 13 + colour_table

    def more(step, offset, transparent):
        return (step < _MAX_SEGMENTS) & (offset < size) & tf.equal(byte(offset), 0x21) & ~transparent

    def extension(step, offset, transparent):
        control = tf.equal(byte(offset + 1), 0xF9)
        transparent = control & tf.equal(tf.bitwise.bitwise_and(byte(offset + 3), 1), 1)
        end = offset + 2

        def sub_blocks(position):
            return tf.while_loop(lambda p: (p < size) & tf.not_equal(byte(p), 0), lambda p: (p + 1 + byte(p),),
                                 (position,))[0] + 1

        return step + 1, sub_blocks(end), transparent

    _, _, transparent = tf.while_loop(more, extension, (0, start, tf.constant(False)))
    return transparent


def _exif_orientation(raw: tf.Tensor, tiff: tf.Tensor) -> tf.Tensor:
    """int32 EXIF orientation (1-8) from the TIFF header at offset ``tiff`` (>= 0) of ``raw``
    (IFD0's tag 0x0112); 1 when the tag is missing or its value is not one of 1-8."""
    byte, big16 = _reader(raw)
    little = tf.equal(big16(tiff), 0x4949)  # "II"

    def u16(offset):
        return tf.where(little, byte(offset) + 256 * byte(offset + 1), big16(offset))

    def u32(offset):
        return tf.where(little, u16(offset) + 65536 * u16(offset + 2), u16(offset) * 65536 + u16(offset + 2))

    ifd = tiff + u32(tiff + 4)
    entries = tf.minimum(u16(ifd), (tf.size(raw) - ifd) // 12)
    starts = ifd + 2 + 12 * tf.range(tf.maximum(entries, 0))
    tags, values = u16(starts), u16(starts + 8)
    found = tf.boolean_mask(values, tf.equal(tags, _ORIENTATION_TAG))
    orientation = tf.cond(tf.size(found) > 0, lambda: found[0], lambda: tf.constant(1))
    return tf.where((orientation >= 1) & (orientation <= 8), orientation, 1)


def _oriented(gray: tf.Tensor, orientation: tf.Tensor) -> tf.Tensor:
    """``[H, W]`` turned upright by EXIF ``orientation`` (1-8, as Pillow's ``exif_transpose``)."""
    def rot90(times):
        return lambda: tf.image.rot90(gray[..., None], times)[..., 0]

    branches = [
        lambda: gray,
        lambda: gray[:, ::-1],
        lambda: gray[::-1, ::-1],
        lambda: gray[::-1, :],
        lambda: tf.transpose(gray),
        rot90(3),
        lambda: tf.transpose(gray[::-1, ::-1]),
        rot90(1),
    ]
    return tf.switch_case(orientation - 1, branches)


def scale_gray(gray: tf.Tensor, height: int | None) -> tf.Tensor:
    """uint8 ``[H, W]`` -> uint8 ``[height, W']``, ``W' = max(1, round(W * height / H))`` (half to
    even, as Python's ``round``), bilinear with antialiasing; unchanged at ``height`` or ``None``."""
    if height is None:
        return gray
    size = tf.shape(gray, out_type=tf.int64)
    width = tf.maximum(tf.constant(1, tf.int64), tf.cast(tf.round(
        tf.cast(size[1], tf.float64) * height / tf.cast(size[0], tf.float64)), tf.int64))

    def resize():
        scaled = tf.image.resize(tf.cast(gray, tf.float32)[..., None], tf.cast(tf.stack([height, width]), tf.int32),
                                 method="bilinear", antialias=True)[..., 0]
        return tf.cast(tf.clip_by_value(tf.round(scaled), 0, 255), tf.uint8)

    return tf.cond(tf.equal(size[0], height), lambda: gray, resize)
