"""Reading text lines from pages (PAGE-XML + page images) vs from cut line images, and recognizing
pages into their layout files.

The script writes ``--pages`` synthetic pages (``tfnhr synth --layout page``: 4-8 lines each,
rotated by up to 1.5 degrees) into a temporary folder, writes every line it cuts from them as a
PNG file (the IAM-style alternative: lines cut once, stored), and times, interleaved over
``--rounds`` rounds, on one thread:

1. **pages, deskew**: :func:`tfnhr.data.pages.reading.load_page_subset` of all pages (parse the XML,
   decode the page, cut and deskew every line): what ``tfnhr train --data PAGES`` does;
2. **pages, no deskew**: the same without rotating lines along their baselines;
3. **line files**: decoding the same lines from their PNG files
   (:func:`tfnhr.data.samples.load_set`): what reading an IAM-layout folder costs.

Then, once: **recognize**: :func:`tfnhr.recognition.pages.recognize_pages` with an untrained
recognizer of the ``--preset`` size (its speed, not its text, matters here), writing every
file back: what ``tfnhr recognize --pages`` does.

Usage::

    python benchmarks/page_reading.py [--pages 100] [--rounds 3] [--preset small] [--threads 1] [--out res.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import _harness


def measure(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="page_reading_") as root:
        report = measure_in(args, Path(root))
    print_table(report)
    return report


def write_line_files(data, folder: Path):
    """Each line of ``data`` as ``folder/N.png``; the samples that read them back."""
    from PIL import Image

    from tfnhr.data.samples import Sample

    folder.mkdir()
    samples = []
    for number, (image, text, line_id) in enumerate(zip(data.images, data.texts, data.ids)):
        path = folder / f"{number}.png"
        Image.fromarray(image).save(path, compress_level=1)
        samples.append(Sample(line_id, text, str(path)))
    return samples


def measure_in(args: argparse.Namespace, root: Path) -> dict:
    _harness.set_threads(args.threads)
    from tfnhr.charset import Charset
    from tfnhr.data.pages.reading import load_page_subset
    from tfnhr.data.samples import load_set
    from tfnhr.data.synthetic.pages import write_pages
    from tfnhr.recognition.transcriber import Transcriber
    from tfnhr.models import build_recognizer
    from tfnhr.recognition.pages import page_sources, recognize_pages

    folder = root / "pages"
    written = write_pages(folder, {"train": args.pages}, layout="page", seed=args.seed, progress=False)
    lines = written["lines"]["train"]
    reference = load_page_subset(folder, None)
    samples = write_line_files(reference, root / "lines")
    steps = {
        "pages_deskew": lambda: load_page_subset(folder, None),
        "pages_no_deskew": lambda: load_page_subset(folder, None, deskew=False),
        "line_files": lambda: load_set(samples),
    }
    _harness.log(f"{args.pages} pages, {lines} lines: {args.rounds} interleaved rounds")
    times = _harness.interleaved(steps, rounds=args.rounds)
    seconds = {name: {"median": statistics.median(t.wall), "all": t.wall} for name, t in times.items()}

    model = build_recognizer(Charset.from_texts(reference.texts), preset=args.preset, input_height=args.height)
    transcriber = Transcriber(model)
    transcriber.read(reference.images[:2])  # trace before timing
    (summary, _), recognize_seconds, _ = _harness.timed(recognize_pages, page_sources(folder), root / "out", transcriber.read)
    median = {name: figures["median"] for name, figures in seconds.items()}
    return {
        "pages": args.pages, "lines": lines, "threads": args.threads, "rounds": args.rounds,
        "seconds": seconds,
        "pages_per_second": {name: args.pages / value for name, value in median.items() if name != "line_files"},
        "lines_per_second": {name: lines / value for name, value in median.items()},
        "deskew_cost": median["pages_deskew"] / median["pages_no_deskew"],
        "pages_vs_line_files": median["pages_deskew"] / median["line_files"],
        "recognize": {"preset": args.preset, "height": args.height, "seconds": recognize_seconds,
                      "pages_per_second": summary.pages / recognize_seconds,
                      "lines_per_second": summary.lines / recognize_seconds, "words": summary.words},
    }


def print_table(report: dict) -> None:
    print(f"{report['pages']} pages, {report['lines']} lines, {report['threads']} thread(s), "
          f"median of {report['rounds']} rounds")
    print(f"{'reading':<18} {'median s':>9} {'range s':>15} {'pages/s':>8} {'lines/s':>8}")
    for name, figures in report["seconds"].items():
        pages = report["pages_per_second"].get(name)
        print(f"{name:<18} {figures['median']:9.3f} {min(figures['all']):7.3f}-{max(figures['all']):<7.3f} "
              f"{'-' if pages is None else f'{pages:.1f}':>8} {report['lines_per_second'][name]:8.1f}")
    print(f"deskew / no deskew = {report['deskew_cost']:.2f}; pages (deskew) / line files = "
          f"{report['pages_vs_line_files']:.2f}")
    recognize = report["recognize"]
    print(f"recognize --pages ({recognize['preset']} preset, height {recognize['height']}, untrained): "
          f"{recognize['seconds']:.1f} s, {recognize['pages_per_second']:.2f} pages/s, "
          f"{recognize['lines_per_second']:.1f} lines/s")


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, rounds=3)
    parser.add_argument("--pages", type=int, default=100, help="synthetic pages (4-8 lines each)")
    parser.add_argument("--preset", choices=("small", "large"), default="small", help="recognizer size")
    parser.add_argument("--height", type=int, default=48, help="the recognizer's input height (px)")
    parser.add_argument("--seed", type=int, default=0, help="synthetic pages seed")
    return _harness.main(measure, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
