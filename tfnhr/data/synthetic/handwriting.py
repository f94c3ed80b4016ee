"""Embedded synthetic handwriting: English text rendered with bundled handwriting-style fonts.

The default data for demos and tests (needs no download): text from ``text/`` beside this module (WordNet
example sentences, one per line, split into train/val/test), rendered with fonts from
``fonts/`` (train fonts and held-out val/test fonts, see :data:`FONT_SPLITS`) with random
size, slant, horizontal stretch, pen width, letter and word spacing, per-word baseline and size
jitter, ink and paper gray levels, blur and pixel noise (and, when asked, per-letter size,
rotation and baseline jitter: :func:`letter_variation`).

Images follow the on-disk convention of :mod:`tfnhr.data.images`: uint8 ``[H, W]``, dark ink on a
white background. :func:`tfnhr.data.synthetic.iam_writer.write_iam_layout` writes a set in the IAM folder layout, so the IAM
reader reads it unchanged. Everything is deterministic: example ``i`` of a split depends only on
``(seed, split, kind, i)`` (and the Pillow/FreeType version).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import string
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from tfnhr.config.options import OptionError

from tfnhr.config.choices import KINDS, SUBSETS, TRAIN_FONT_SETS

CHARS = string.ascii_letters + string.digits + " .,;:'\"!?-()&/"
"""Every character the texts use and every bundled font draws: ASCII letters, digits, space and
``. , ; : ' " ! ? - ( ) & /``."""

FONT_DIR = Path(__file__).resolve().parent / "fonts"
TEXT_DIR = Path(__file__).resolve().parent / "text"

FONT_SPLITS: dict[str, list[str]] = {
    "train": ["ComicNeue-Regular.otf", "ComicNeue-BoldItalic.otf", "ComicNeue-Light.otf",
              "DancingScript-Regular.otf", "DancingScript-Bold.otf", "dkg.ttf", "KaushanScript-Regular.otf",
              "SteveHand.ttf", "Delphine.ttf", "Ecolier-court.ttf", "femkeklaver.ttf", "KleeOne-Regular-ASCII.ttf",
              "LeckerliOne-Regular.ttf", "PenScriptSubset.ttf", "BrushScriptSubset.ttf", "SetoFont-ASCII.ttf",
              "kiloji-ASCII.ttf", "Havana-Regular.otf", "LobsterTwo-Regular.otf", "Domestic_Manners.ttf",
              "annie-use-your-telescope.woff", "architects-daughter.woff", "calligraffitti.woff",
              "caveat.woff", "caveat-brush.woff", "cedarville-cursive.woff", "coming-soon.woff",
              "covered-by-your-grace.woff", "crafty-girls.woff", "dawning-of-a-new-day.woff", "delius.woff",
              "give-you-glory.woff", "gloria-hallelujah.woff", "gochi-hand.woff", "handlee.woff",
              "homemade-apple.woff", "indie-flower.woff", "itim.woff", "just-another-hand.woff",
              "just-me-again-down-here.woff", "kalam.woff", "la-belle-aurore.woff", "liu-jian-mao-cao.woff",
              "long-cang.woff", "loved-by-the-king.woff", "ma-shan-zheng.woff", "mali.woff", "mansalva.woff",
              "marck-script.woff", "neucha.woff", "nothing-you-could-do.woff", "over-the-rainbow.woff",
              "patrick-hand.woff", "reenie-beanie.woff", "schoolbell.woff", "shadows-into-light.woff",
              "short-stack.woff", "sriracha.woff", "sue-ellen-francisco.woff", "swanky-and-moo-moo.woff",
              "the-girl-next-door.woff", "waiting-for-the-sunrise.woff", "yomogi.woff", "zeyada.woff",
              "zhi-mang-xing.woff"],
    "val": ["Breip.ttf", "Kristi.ttf"],
    "test": ["Rufscript010.ttf", "Purisa.otf"],
}
"""Font files (in ``data/fonts/``) per split; val and test fonts are of families absent from train.
The training fonts are the ``core`` set of :data:`~tfnhr.config.choices.TRAIN_FONT_SETS`."""

MORE_TRAIN_FONTS: list[str] = [
    "aguafina-script.woff", "alex-brush.woff", "allison.woff", "allura.woff", "amita.woff", "arizonia.woff",
    "bad-script.woff", "berkshire-swash.woff", "beth-ellen.woff", "bilbo.woff", "birthstone.woff",
    "birthstone-bounce.woff", "bonheur-royale.woff", "borel.woff", "caramel.woff", "carattere.woff",
    "charm.woff", "charmonman.woff", "chilanka.woff", "clicker-script.woff", "comforter.woff",
    "comforter-brush.woff", "cookie.woff", "corinthia.woff", "courgette.woff", "damion.woff", "dekko.woff",
    "delicious-handrawn.woff", "dr-sugiyama.woff", "eagle-lake.woff", "east-sea-dokdo.woff",
    "edu-au-vic-wa-nt-hand.woff", "edu-nsw-act-foundation.woff", "edu-qld-beginner.woff",
    "edu-sa-beginner.woff", "edu-tas-beginner.woff", "edu-vic-wa-nt-beginner.woff", "engagement.woff",
    "ephesis.woff", "estonia.woff", "felipa.woff", "fondamento.woff", "fuggles.woff",
    "fuzzy-bubbles.woff", "gaegu.woff", "gamja-flower.woff", "grand-hotel.woff", "grape-nuts.woff",
    "great-vibes.woff", "grechen-fuemen.woff", "grey-qo.woff", "gveret-levin.woff", "gwendolyn.woff",
    "hachi-maru-pop.woff", "herr-von-muellerhoff.woff", "hi-melody.woff", "hurricane.woff",
    "imperial-script.woff", "ingrid-darling.woff", "inspiration.woff", "island-moments.woff", "italianno.woff",
    "jim-nightshade.woff", "kavivanar.woff", "kolker-brush.woff", "lakki-reddy.woff", "licorice.woff",
    "lovers-quarrel.woff", "luxurious-script.woff", "lxgw-wenkai-tc.woff", "mea-culpa.woff", "meddon.woff",
    "meie-script.woff", "meow-script.woff", "merienda.woff", "miss-fajardose.woff",
    "monsieur-la-doulaise.woff", "montez.woff", "moon-dance.woff", "mr-bedfort.woff", "mr-dafoe.woff",
    "mr-de-haviland.woff", "mrs-saint-delafield.woff", "ms-madi.woff", "my-soul.woff", "mynerve.woff",
    "nerko-one.woff", "niconne.woff", "norican.woff", "oooh-baby.woff", "pacifico.woff", "pangolin.woff",
    "parisienne.woff", "passions-conflict.woff", "petit-formal-script.woff", "pinyon-script.woff",
    "playpen-sans.woff", "princess-sofia.woff", "puppies-play.woff", "qwigley.woff",
    "quintessential.woff", "rancho.woff", "redressed.woff", "rochester.woff", "rouge-script.woff",
    "ruge-boogie.woff", "sacramento.woff", "sassy-frass.woff", "satisfy.woff",
    "sedgwick-ave.woff", "send-flowers.woff", "shadows-into-light-two.woff", "smooch.woff", "sofia.woff",
    "square-peg.woff", "stalemate.woff", "sunshiney.woff", "tangerine.woff", "the-nautigal.woff",
    "twinkle-star.woff", "updock.woff", "vibur.woff", "vujahday-script.woff", "water-brush.woff",
    "waterfall.woff", "whisper.woff", "windsong.woff", "yellowtail.woff", "yesteryear.woff",
    "playwrite-de-grund.woff", "playwrite-us-trad.woff", "playwrite-fr-moderne.woff", "playwrite-nl.woff",
    "playwrite-es.woff", "playwrite-cz.woff", "playwrite-no.woff", "playwrite-ar.woff", "playwrite-at.woff",
    "playwrite-au-qld.woff",
]
"""Training fonts of the ``all`` set beyond ``FONT_SPLITS["train"]``: Google Fonts handwriting
families as Fontsource packages them, those that draw all of :data:`CHARS` with lower case
unlike its capitals and passed a look (``tfnhr/data/synthetic/fonts/README.md``). In 14 minutes of
training such a set of hands cost the print-like test hands (docs/lab/fonts-and-data.md); in an
hour with ``stem-80`` these read all held-out hands better (docs/lab/main-job-full.md)."""

STROKE_LIMIT = {"Kristi.ttf": 0.25}
"""Most pen width (px, see :attr:`RenderStyle.stroke_width`) added to fonts whose letters are so
tight that a thicker pen closes them up."""

DEFAULT_CHARS = {"lines": (12, 40), "words": (1, 16)}
"""Default ``(min_chars, max_chars)`` of :func:`sample_texts` per kind."""

_PUNCTUATION = "".join(c for c in CHARS if not c.isalnum() and c != " ")
_REFERENCE_HEIGHT = 0.55
"""Each font is scaled so that sqrt(x-height * cap-height) is this fraction of the size."""


def _check_split(split: str) -> None:
    if split not in SUBSETS:
        raise ValueError(f"split must be one of {SUBSETS}, got {split!r}")


def font_paths(split: str, train_fonts: str = "core") -> list[Path]:
    """The bundled font files of ``split`` ("train", "val" or "test"); ``train_fonts`` (one of
    :data:`~tfnhr.config.choices.TRAIN_FONT_SETS`) picks the training ones."""
    _check_split(split)
    if train_fonts not in TRAIN_FONT_SETS:
        raise ValueError(f"train_fonts must be one of {TRAIN_FONT_SETS}, got {train_fonts!r}")
    more = MORE_TRAIN_FONTS if split == "train" and train_fonts == "all" else []
    return [FONT_DIR / name for name in FONT_SPLITS[split] + more]


@functools.lru_cache(maxsize=None)
def corpus_text(split: str) -> str:
    """The normalised text of ``split``: one sentence per line, characters from :data:`CHARS`."""
    _check_split(split)
    return (TEXT_DIR / f"{split}.txt").read_text(encoding="ascii")


@functools.lru_cache(maxsize=None)
def _tokens(split: str) -> tuple[str, ...]:
    return tuple(corpus_text(split).split())


@functools.lru_cache(maxsize=None)
def _words(split: str, min_chars: int, max_chars: int) -> tuple[str, ...]:
    """Tokens of ``split`` stripped of leading/trailing punctuation, of min..max characters."""
    stripped = (token.strip(_PUNCTUATION) for token in _tokens(split))
    return tuple(word for word in stripped if min_chars <= len(word) <= max_chars)


def _line(tokens: Sequence[str], rng: np.random.Generator, min_chars: int, max_chars: int) -> str:
    """Consecutive tokens from a random start, as many as fit in ``max_chars``; retried until the
    line has at least ``min_chars``."""
    for _ in range(1000):
        start = int(rng.integers(len(tokens)))
        line, end = tokens[start], start + 1
        while end < len(tokens) and len(line) + 1 + len(tokens[end]) <= max_chars:
            line += " " + tokens[end]
            end += 1
        if min_chars <= len(line) <= max_chars:
            return line
    raise ValueError(f"found no line of {min_chars}..{max_chars} characters in 1000 tries")


def sample_texts(kind: str, count: int, rng: np.random.Generator, split: str = "train",
                 min_chars: int | None = None, max_chars: int | None = None) -> list[str]:
    """``count`` random texts from the text of ``split``.

    ``kind``: "lines" (consecutive words, ``min_chars..max_chars`` characters, default 12..40) or
    "words" (single words without leading/trailing punctuation, default 1..16 characters); with
    one bound given, the other's default gives way to it.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    _check_split(split)
    default_min, default_max = DEFAULT_CHARS[kind]
    # one bound given: the other's default moves out of its way (--max-chars 8 alone: 1..8 for words, 8..8 for lines)
    min_chars = min(default_min, max_chars or default_min) if min_chars is None else min_chars
    max_chars = max(default_max, min_chars) if max_chars is None else max_chars
    if not 1 <= min_chars <= max_chars:
        raise OptionError("need 1 <= {min_name} <= {max_name}, got {values}", values=f"{min_chars}, {max_chars}",
                          min_name=("min_chars", "--min-chars"), max_name=("max_chars", "--max-chars"))
    if kind == "lines":
        return [_line(_tokens(split), rng, min_chars, max_chars) for _ in range(count)]
    words = _words(split, min_chars, max_chars)
    if not words:
        raise ValueError(f"the {split} text has no word of {min_chars}..{max_chars} characters")
    return [words[int(i)] for i in rng.integers(len(words), size=count)]


LETTER_VARIATION = {"glyph_stretch": 0.08, "glyph_height": 0.06, "glyph_rotation": 3.0, "glyph_shift": 0.015}
"""The :class:`RenderStyle` fields drawn anew for every letter (off, 0, by default) and their
values at ``tfnhr synth --letter-variation 1``; see :func:`letter_variation`."""
GLYPH_JITTERS = tuple(LETTER_VARIATION)
"""The names of the per-letter jitter fields of :class:`RenderStyle`."""
GLYPH_SCALE_LIMITS = (0.7, 1.3)
"""Each letter's width and height factors are clipped to this range."""
GLYPH_ROTATION_LIMIT = 10.0
"""Each letter's rotation is clipped to this many degrees either way."""


def letter_variation(scale: float) -> dict[str, float]:
    """The per-letter jitter fields of :class:`RenderStyle` at ``scale`` times
    :data:`LETTER_VARIATION` (0: every letter drawn as the font draws it)."""
    if not scale >= 0:
        raise ValueError(f"the letter variation must be >= 0, got {scale}")
    return {name: scale * value for name, value in LETTER_VARIATION.items()}


@dataclasses.dataclass(frozen=True)
class RenderStyle:
    """Random rendering parameters; each ``(low, high)`` pair is a uniform range drawn per image
    unless noted. Lengths in "em" are fractions of the font size.

    Attributes:
        font_size: size in px. Fonts are rescaled to look equally large (same
            sqrt(x-height * cap-height)). The default 28..38 px gives line images 28..85 px high
            (5th/50th/95th percentile about 37/50/72 px, 300..750 px wide for 12..40
            characters) and word images 16..90 px high (median 40).
        stretch: horizontal scale factor of the whole image.
        slant: shear, px of rightward shift per px of height (positive leans right).
        stroke_width: px of pen width added around the glyph outlines.
        baseline_jitter: standard deviation of each word's vertical shift, em.
        size_jitter: standard deviation of each word's relative size change.
        glyph_stretch: standard deviation of each letter's relative width change (its advance
            follows it), drawn per letter: no hand writes a letter twice alike.
        glyph_height: standard deviation of each letter's relative height change.
        glyph_rotation: standard deviation of each letter's rotation about its pen position on
            the baseline, degrees (positive turns clockwise, leaning the letter right).
        glyph_shift: standard deviation of each letter's vertical shift, em.
        letter_spacing: extra space after each letter, em.
        word_spacing: width of each gap between words, em (drawn per gap).
        ink_gray: gray level of solid ink (0 = black).
        paper_gray: gray level of the background (255 = white).
        noise: standard deviation of Gaussian pixel noise, gray levels.
        blur: standard deviation of the Gaussian blur, px (at most about 1).
        margin: blank margin, px, drawn per side (integers).
    """

    font_size: tuple[float, float] = (28.0, 38.0)
    stretch: tuple[float, float] = (0.85, 1.15)
    slant: tuple[float, float] = (-0.15, 0.45)
    stroke_width: tuple[float, float] = (0.0, 1.0)
    baseline_jitter: float = 0.04
    size_jitter: float = 0.03
    glyph_stretch: float = 0.0
    glyph_height: float = 0.0
    glyph_rotation: float = 0.0
    glyph_shift: float = 0.0
    letter_spacing: tuple[float, float] = (-0.02, 0.03)
    word_spacing: tuple[float, float] = (0.25, 0.6)
    ink_gray: tuple[float, float] = (0.0, 70.0)
    paper_gray: tuple[float, float] = (235.0, 255.0)
    noise: tuple[float, float] = (0.0, 8.0)
    blur: tuple[float, float] = (0.0, 0.8)
    margin: tuple[int, int] = (2, 10)

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, tuple) and not (len(value) == 2 and value[0] <= value[1]):
                raise ValueError(f"RenderStyle.{field.name} must be a (low, high) pair, got {value!r}")
        jitters = {name: getattr(self, name) for name in GLYPH_JITTERS}
        if min(jitters.values()) < 0:
            raise ValueError(f"RenderStyle's per-letter jitters must be >= 0, got {jitters}")
        if self.font_size[0] < 4 or self.stretch[0] <= 0 or self.margin[0] < 0 or self.stroke_width[0] < 0:
            raise ValueError(f"RenderStyle has a non-positive size, stretch, margin or stroke: {self}")


@functools.lru_cache(maxsize=None)
def _font(path: str, size: int):
    return ImageFont.truetype(path, size)


@functools.lru_cache(maxsize=None)
def _font_scale(path: str) -> float:
    """Size factor that gives ``path`` the reference sqrt(x-height * cap-height)."""
    font = _font(path, 100)
    x_height = -font.getbbox("x", anchor="ls")[1]
    cap_height = -font.getbbox("H", anchor="ls")[1]
    return 100.0 * _REFERENCE_HEIGHT / math.sqrt(x_height * cap_height)


@functools.lru_cache(maxsize=1 << 16)
def _glyph(path: str, size: int, char: str) -> tuple[np.ndarray, int, int, float]:
    """``(uint8 [h, w] coverage, left, top, advance)`` of ``char`` at ``size`` px: the bitmap's
    offset from the pen position on the baseline, and the pen's advance (px)."""
    font = _font(path, size)
    left, top, right, bottom = font.getbbox(char, anchor="ls")
    bitmap = Image.new("L", (max(right - left, 1), max(bottom - top, 1)))
    ImageDraw.Draw(bitmap).text((-left, -top), char, fill=255, font=font, anchor="ls")
    return np.asarray(bitmap), left, top, font.getlength(char)


@dataclasses.dataclass(frozen=True)
class _Draw:
    """One image's values of the :class:`RenderStyle` ranges (same units)."""

    font_size: float
    stretch: float
    slant: float
    stroke_width: float
    letter_spacing: float
    ink_gray: float
    paper_gray: float
    noise: float
    blur: float

    @classmethod
    def sample(cls, style: RenderStyle, rng: np.random.Generator) -> "_Draw":
        names = [field.name for field in dataclasses.fields(cls)]
        low, high = np.array([getattr(style, name) for name in names], dtype=np.float64).T
        return cls(*(low + rng.random(len(names)) * (high - low)).tolist())


def _layout(words: Sequence[str], path: str, draw: _Draw, rng: np.random.Generator,
            style: RenderStyle) -> list[list[tuple[np.ndarray, int, int]]]:
    """Glyphs of each word as ``(coverage, x, y)``: bitmap top-left corners, baseline at y = 0.

    Each word gets its own size (whole px, jittered) and baseline shift; each gap between words
    its own width. Letters advance by the font's advance widths (no kerning) plus the spacing.
    """
    size = draw.font_size * _font_scale(path)
    letter_spacing = draw.letter_spacing * size
    scales = np.clip(1 + style.size_jitter * rng.standard_normal(len(words)), 0.8, 1.2)
    baselines = np.rint(style.baseline_jitter * size * rng.standard_normal(len(words))).astype(int).tolist()
    gaps = (rng.uniform(*style.word_spacing, size=len(words)) * size - letter_spacing).tolist()
    pen, placed = 0.0, []
    for word, scale, baseline, gap in zip(words, scales.tolist(), baselines, gaps):
        word_size = max(4, round(size * scale))
        glyphs = []
        for char, (stretch, height, rotation, shift) in zip(word, _letter_draws(len(word), style, size, rng)):
            coverage, left, top, advance = _glyph(path, word_size, char)
            coverage, left, top = _warp_glyph(coverage, left, top, stretch, height, rotation)
            glyphs.append((coverage, round(pen) + left, baseline + round(shift) + top))
            pen += advance * stretch + letter_spacing
        placed.append(glyphs)
        pen += gap
    return placed


def _letter_draws(count: int, style: RenderStyle, size: float,
                  rng: np.random.Generator) -> list[tuple[float, float, float, float]]:
    """Per letter of a word: ``(width factor, height factor, rotation in degrees, vertical shift
    in px)`` drawn from ``style``'s per-letter jitters (:data:`GLYPH_JITTERS`). Nothing is drawn
    from ``rng`` when every jitter is 0, so the jitters leave such a style's random stream, and
    its lines, unchanged."""
    if not any(getattr(style, name) for name in GLYPH_JITTERS):
        return [(1.0, 1.0, 0.0, 0.0)] * count
    normal = rng.standard_normal((count, 4))
    stretch = np.clip(1 + style.glyph_stretch * normal[:, 0], *GLYPH_SCALE_LIMITS)
    height = np.clip(1 + style.glyph_height * normal[:, 1], *GLYPH_SCALE_LIMITS)
    rotation = np.clip(style.glyph_rotation * normal[:, 2], -GLYPH_ROTATION_LIMIT, GLYPH_ROTATION_LIMIT)
    shift = style.glyph_shift * size * normal[:, 3]
    return list(zip(stretch.tolist(), height.tolist(), rotation.tolist(), shift.tolist()))


def _warp_glyph(coverage: np.ndarray, left: int, top: int, stretch: float, height: float,
                rotation: float) -> tuple[np.ndarray, int, int]:
    """A glyph bitmap (uint8 ``[h, w]`` with its top-left corner at ``(left, top)`` px from the
    pen position on the baseline) rotated by ``rotation`` degrees about that position, then
    scaled by ``stretch`` across and ``height`` down: the new bitmap and its corner."""
    if stretch == 1.0 and height == 1.0 and rotation == 0.0:
        return coverage, left, top
    angle = math.radians(rotation)
    forward = np.diag([stretch, height]) @ np.array([[math.cos(angle), -math.sin(angle)],
                                                     [math.sin(angle), math.cos(angle)]])
    rows, cols = coverage.shape
    corners = forward @ np.array([[left, left + cols, left, left + cols], [top, top, top + rows, top + rows]])
    new_left, new_top = math.floor(corners[0].min()), math.floor(corners[1].min())
    size = (max(1, math.ceil(corners[0].max()) - new_left), max(1, math.ceil(corners[1].max()) - new_top))
    inverse = np.linalg.inv(forward)
    origin = inverse @ np.array([new_left, new_top]) - np.array([left, top])
    warped = Image.fromarray(coverage).transform(
        size, Image.Transform.AFFINE, (inverse[0, 0], inverse[0, 1], origin[0], inverse[1, 0], inverse[1, 1], origin[1]),
        Image.Resampling.BILINEAR)
    return np.asarray(warped), new_left, new_top


def _thicken(coverage: np.ndarray, amount: float) -> np.ndarray:
    """``coverage`` (float [H, W], zero border) dilated by ``amount`` px (0..1) per side: a blend
    with its 3x3 maximum."""
    if amount < 0.02:
        return coverage
    grown = coverage.copy()
    np.maximum(grown[:, 1:], coverage[:, :-1], out=grown[:, 1:])
    np.maximum(grown[:, :-1], coverage[:, 1:], out=grown[:, :-1])
    rows = grown.copy()
    np.maximum(grown[1:], rows[:-1], out=grown[1:])
    np.maximum(grown[:-1], rows[1:], out=grown[:-1])
    return coverage + amount * (grown - coverage)


def _blur(image: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur of ``image`` (float [H, W]) with a 3-tap kernel (fine for sigma <= 1)."""
    if sigma < 0.05:
        return image
    side = math.exp(-0.5 / sigma**2)
    kernel = np.array([side, 1.0, side], np.float32) / (1 + 2 * side)
    padded = np.pad(image, 1, mode="edge")
    rows = kernel[0] * padded[:-2] + kernel[1] * padded[1:-1] + kernel[2] * padded[2:]
    return kernel[0] * rows[:, :-2] + kernel[1] * rows[:, 1:-1] + kernel[2] * rows[:, 2:]


Box = tuple[int, int, int, int]
"""``(x0, y0, x1, y1)`` in px, exclusive ends."""


def _compose(placed: list[list[tuple[np.ndarray, int, int]]]) -> tuple[np.ndarray, list[Box]]:
    """The glyphs of :func:`_layout` drawn on a uint8 ``[H, W]`` ink canvas just large enough,
    and each word's box on it (one px of room around the ink, for thickening)."""
    boxes = [(min(x for _, x, _ in g) - 1, min(y for _, _, y in g) - 1,
              max(x + c.shape[1] for c, x, _ in g) + 1, max(y + c.shape[0] for c, _, y in g) + 1) for g in placed]
    left, top = min(b[0] for b in boxes), min(b[1] for b in boxes)
    canvas = np.zeros((max(b[3] for b in boxes) - top, max(b[2] for b in boxes) - left), np.uint8)
    for glyphs in placed:
        for coverage, x, y in glyphs:
            region = canvas[y - top:y - top + coverage.shape[0], x - left:x - left + coverage.shape[1]]
            np.maximum(region, coverage, out=region)
    return canvas, [(x0 - left, y0 - top, x1 - left, y1 - top) for x0, y0, x1, y1 in boxes]


def _shear(canvas: np.ndarray, stretch: float, slant: float) -> tuple[np.ndarray, float]:
    """``canvas`` mapped by ``u = stretch * x - slant * y + shift`` (tops of letters lean right for
    slant > 0), and ``shift`` (which keeps ``u >= 0``)."""
    height = canvas.shape[0]
    shift = max(slant, 0.0) * height
    width = math.ceil(stretch * canvas.shape[1] + abs(slant) * height)
    sheared = Image.fromarray(canvas).transform((width, height), Image.Transform.AFFINE,
                                                (1 / stretch, slant / stretch, -shift / stretch, 0, 1, 0),
                                                Image.Resampling.BILINEAR)
    return np.asarray(sheared), shift


def _paper(ink: np.ndarray, draw: _Draw, rng: np.random.Generator) -> np.ndarray:
    """Ink coverage (float ``[H, W]`` in [0, 1]) as uint8 gray: ink on paper, plus noise."""
    gray = rng.standard_normal(ink.shape, dtype=np.float32)
    gray *= draw.noise
    gray += draw.paper_gray
    gray -= ink * (draw.paper_gray - draw.ink_gray)
    return np.clip(gray, 0, 255).round().astype(np.uint8)


def _render(text: str, font_path: str | Path, rng: np.random.Generator,
            style: RenderStyle) -> tuple[np.ndarray, list[Box]]:
    """:func:`render`, plus each word's box in the image."""
    words = text.split()
    if not words or any(c not in CHARS for c in text):
        raise ValueError(f"text must be non-empty and use only synthetic.CHARS, got {text!r}")
    path = Path(font_path)
    draw = _Draw.sample(style, rng)
    canvas, boxes = _compose(_layout(words, str(path), draw, rng, style))
    coverage, shift = _shear(canvas, draw.stretch, draw.slant)
    rows, cols = np.flatnonzero(coverage.max(axis=1) > 20), np.flatnonzero(coverage.max(axis=0) > 20)
    if not len(rows):
        raise ValueError(f"{path.name} drew no ink for {text!r}")
    coverage = coverage[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]
    top, bottom, left, right = rng.integers(style.margin[0], style.margin[1] + 1, size=4).tolist()
    # One px more on each side leaves room for thickening; it is cut off after the blur.
    ink = np.zeros((coverage.shape[0] + top + bottom + 2, coverage.shape[1] + left + right + 2), np.float32)
    ink[top + 1:top + 1 + coverage.shape[0], left + 1:left + 1 + coverage.shape[1]] = coverage
    ink *= 1 / 255
    stroke = min(draw.stroke_width, STROKE_LIMIT.get(path.name, math.inf))
    image = _paper(_blur(_thicken(ink, stroke), draw.blur)[1:-1, 1:-1], draw, rng)

    height, width = image.shape
    word_boxes = []
    for x0, y0, x1, y1 in boxes:
        us = [draw.stretch * x - draw.slant * y + shift - cols[0] + left for x in (x0, x1) for y in (y0, y1)]
        u0 = min(max(math.floor(min(us)), 0), width - 1)
        v0 = min(max(y0 - rows[0] + top, 0), height - 1)
        word_boxes.append((u0, v0, max(min(math.ceil(max(us)), width), u0 + 1),
                           max(min(y1 - rows[0] + top, height), v0 + 1)))
    return image, word_boxes


def render(text: str, font_path: str | Path, rng: np.random.Generator,
           style: RenderStyle = RenderStyle()) -> np.ndarray:
    """``text`` drawn with the font at ``font_path`` in a random style: uint8 ``[H, W]``, dark ink
    on a light (default near-white) background, cropped to the ink plus a random margin."""
    return _render(text, font_path, rng, style)[0]


class RenderedExample(NamedTuple):
    """One rendered example: uint8 ``[H, W]`` ``image``, its ``text``, each word's ``(x0, y0, x1,
    y1)`` box in the image (px) and the ``font`` file name it was drawn with."""

    image: np.ndarray
    text: str
    boxes: list[Box]
    font: str


def render_example(seed: int, kind: str, split: str, index: int, style: RenderStyle = RenderStyle(),
                   chars: tuple[int | None, int | None] = (None, None),
                   train_fonts: str = "core") -> RenderedExample:
    """Example ``index`` of a split, from its own random stream (what :func:`generate` gives,
    plus each word's box and the font); ``chars``: ``(min_chars, max_chars)`` of
    :func:`sample_texts`; ``train_fonts``: the training-font set (:func:`font_paths`)."""
    check_args(seed, kind, split)
    rng = np.random.default_rng([seed, SUBSETS.index(split), KINDS.index(kind), index])
    text = sample_texts(kind, 1, rng, split, *chars)[0]
    fonts = font_paths(split, train_fonts)
    font = fonts[int(rng.integers(len(fonts)))]
    image, boxes = _render(text, font, rng, style)
    return RenderedExample(image, text, boxes, font.name)


def render_item(seed: int, kind: str, style: RenderStyle, chars: tuple[int | None, int | None], train_fonts: str,
                 item: tuple[str, int]) -> RenderedExample:
    """:func:`render_example` of ``item = (split, index)``."""
    split, index = item
    return render_example(seed, kind, split, index, style, chars, train_fonts)


def check_args(seed: int, kind: str, split: str, kinds: Sequence[str] = KINDS) -> None:
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if kind not in kinds:
        raise ValueError(f"kind must be one of {tuple(kinds)}, got {kind!r}")
    _check_split(split)


def generate(count: int, seed: int = 0, kind: str = "lines", split: str = "train",
             style: RenderStyle = RenderStyle(), min_chars: int | None = None,
             max_chars: int | None = None) -> list[tuple[np.ndarray, str]]:
    """``count`` rendered examples ``(uint8 [H, W] image, text)`` of ``split`` with its fonts;
    texts from :func:`sample_texts` (``min_chars``/``max_chars``: its defaults per kind).

    Example ``i`` depends only on ``(seed, split, kind, i)`` (and the other arguments), not on
    ``count``.
    """
    check_args(seed, kind, split)
    return [render_example(seed, kind, split, index, style, (min_chars, max_chars))[:2] for index in range(count)]
