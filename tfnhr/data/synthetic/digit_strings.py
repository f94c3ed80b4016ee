"""Embedded toy data: variable-size images of digit strings drawn from a built-in 3x5 bitmap font.

Needs no files and no network, so the main job and the tests always have data. Each example is a
string of 1..``max_digits`` digits; every glyph is scaled by an integer factor (so image heights
vary), glyphs are separated by 1..2 blank columns per scale unit, and the image gets a random
margin and pixel noise. Deterministic for a given seed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

# 3 columns x 5 rows per digit, '#' = ink.
GLYPH_ROWS = {
    "0": ("###", "#.#", "#.#", "#.#", "###"),
    "1": (".#.", "##.", ".#.", ".#.", "###"),
    "2": ("###", "..#", "###", "#..", "###"),
    "3": ("###", "..#", ".##", "..#", "###"),
    "4": ("#.#", "#.#", "###", "..#", "..#"),
    "5": ("###", "#..", "###", "..#", "###"),
    "6": ("###", "#..", "###", "#.#", "###"),
    "7": ("###", "..#", ".#.", ".#.", ".#."),
    "8": ("###", "#.#", "###", "#.#", "###"),
    "9": ("###", "#.#", "###", "..#", "###"),
}
GLYPHS = {digit: np.array([[c == "#" for c in row] for row in rows], dtype=np.float32)
          for digit, rows in GLYPH_ROWS.items()}
ALPHABET = "0123456789"


@dataclasses.dataclass(frozen=True)
class DigitStrings:
    """A generated set: ``images[i]`` is ``[H_i, W_i, 1]`` float32 in [0, 1]; ``texts[i]`` its digits."""

    images: list[np.ndarray]
    texts: list[str]

    def labels(self) -> list[list[int]]:
        """Texts as class indices into :data:`ALPHABET` (0..9)."""
        return [[ALPHABET.index(c) for c in text] for text in self.texts]


def render(text: str, scale: int, rng: np.random.Generator, noise: float = 0.05) -> np.ndarray:
    """One image ``[H, W, 1]`` of ``text`` with glyphs ``scale`` x bigger than 3x5."""
    if not text or any(c not in GLYPHS for c in text):
        raise ValueError(f"text must be 1 or more digits, got {text!r}")
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    pieces = []
    for index, char in enumerate(text):
        if index:
            pieces.append(np.zeros((5 * scale, scale * int(rng.integers(1, 3))), np.float32))
        pieces.append(np.kron(GLYPHS[char], np.ones((scale, scale), np.float32)))
    ink = np.concatenate(pieces, axis=1)
    top, bottom, left, right = rng.integers(0, scale + 1, size=4)
    image = np.pad(ink, ((top, bottom), (left + 1, right + 1)))
    image = np.clip(image + rng.normal(0.0, noise, image.shape).astype(np.float32), 0.0, 1.0)
    return image[..., np.newaxis]


def generate(count: int, seed: int = 0, max_digits: int = 5, scales: tuple[int, ...] = (1, 2, 3)) -> DigitStrings:
    """``count`` random digit-string images (sizes vary with length and scale)."""
    if count < 1 or max_digits < 1:
        raise ValueError(f"count and max_digits must be >= 1, got {count}, {max_digits}")
    rng = np.random.default_rng(seed)
    texts = ["".join(rng.choice(list(ALPHABET), size=int(rng.integers(1, max_digits + 1)))) for _ in range(count)]
    images = [render(text, int(rng.choice(scales)), rng) for text in texts]
    return DigitStrings(images=images, texts=texts)
