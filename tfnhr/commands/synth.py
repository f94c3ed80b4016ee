"""``tfnhr synth``: write the embedded synthetic handwriting set in the IAM folder layout, or as
pages with PAGE-XML/ALTO files (``--layout``)."""

from __future__ import annotations

import argparse
import json

from tfnhr.config.choices import KINDS, PAGE_LAYOUTS, TRAIN_FONT_SETS
from tfnhr.commands.common import process_count, reports_errors
from tfnhr.config.options import DefaultsHelpFormatter
from tfnhr.config.ranges import COUNT, NONNEGATIVE, NONNEGATIVE_COUNT, POSITIVE


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``synth`` parser to ``commands``."""
    parser = commands.add_parser(
        "synth", help="write synthetic handwriting lines/words in the IAM layout",
        description="Render English text with the bundled handwriting fonts (train fonts for "
                    "--train, held-out fonts for --val/--test) and write the images, "
                    "ascii/lines.txt or words.txt and the split files as in IAM.",
        formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--out", required=True, help="folder to write (new, empty, or an earlier synthetic set)")
    parser.add_argument("--kind", choices=(*KINDS, "both"), default="lines",
                        help="line images, word images, or lines plus the words cropped from them (IAM layout)")
    parser.add_argument("--layout", choices=("iam", *PAGE_LAYOUTS), default="iam",
                        help="iam: the IAM folder layout; page, page-2013, alto, alto-2: pages of 4-8 lines, slightly "
                             "rotated, as a Transkribus-style export (OUT/train|valid|test/NAME.png with page/ or "
                             "alto/NAME.xml); --train/--val/--test then count pages")
    parser.add_argument("--train", type=NONNEGATIVE_COUNT.type, default=2000,
                        help="training examples (lines, words for --kind words, pages for a page --layout)")
    parser.add_argument("--val", type=NONNEGATIVE_COUNT.type, default=200, help="validation examples (held-out fonts)")
    parser.add_argument("--test", type=NONNEGATIVE_COUNT.type, default=200, help="test examples (other held-out fonts)")
    parser.add_argument("--seed", type=NONNEGATIVE_COUNT.type, default=0,
                        help="random seed (example i of a split depends only on it)")
    parser.add_argument("--font-size", type=POSITIVE.type, nargs=2, metavar=("MIN", "MAX"), default=(28.0, 38.0),
                        help="range of the font size in px (at 28-38 px, line images are about 37-72 px high)")
    parser.add_argument("--letter-variation", type=NONNEGATIVE.type, default=0.0,
                        help="per-letter random width, height, rotation and baseline shift, as a multiple of "
                             "tfnhr.data.synthetic.handwriting.LETTER_VARIATION (1: widths and heights +-8 %% and +-6 %%, "
                             "rotations +-3 degrees, shifts +-0.015 em, standard deviations); 0: letters as the "
                             "font draws them")
    parser.add_argument("--min-chars", type=COUNT.type, default=None,
                        help="shortest text in characters; None: 12 for lines, 1 for words")
    parser.add_argument("--max-chars", type=COUNT.type, default=None,
                        help="longest text in characters; None: 40 for lines, 16 for words")
    parser.add_argument("--train-fonts", choices=TRAIN_FONT_SETS, default="core",
                        help="training hands: the 65 core ones, or all 204 bundled ones (many more scripts; they "
                             "pay with long training: the main job's full preset trains on them); the held-out "
                             "fonts are the same")
    parser.add_argument("--processes", type=process_count, default="auto", metavar="N|auto",
                        help="render the IAM layout's images in N worker processes (the same images); auto: one per usable core")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run_synth)


@reports_errors("synth", errors=(FileExistsError, ValueError))
def run_synth(args: argparse.Namespace) -> int:
    """Write the set; print its summary as JSON. Exit status 2 on a bad folder or argument."""
    from tfnhr.data.synthetic import handwriting, iam_writer, pages as synthetic_pages

    style = handwriting.RenderStyle(font_size=tuple(args.font_size), **handwriting.letter_variation(args.letter_variation))
    counts = {"train": args.train, "val": args.val, "test": args.test}
    if args.layout != "iam":
        if (args.kind != "lines" or args.min_chars is not None or args.max_chars is not None
                or args.train_fonts != "core"):
            raise ValueError("a page --layout writes lines of the default lengths in the core fonts: leave out "
                             "--kind, --min-chars, --max-chars and --train-fonts")
        summary = synthetic_pages.write_pages(args.out, counts, layout=args.layout, seed=args.seed, style=style,
                                              progress=not args.quiet)
        print(json.dumps(summary, indent=1))
        return 0
    summary = iam_writer.write_iam_layout(
        args.out, counts, kind=args.kind,
        seed=args.seed, style=style, progress=not args.quiet,
        min_chars=args.min_chars, max_chars=args.max_chars, train_fonts=args.train_fonts, processes=args.processes)
    print(json.dumps(summary, indent=1))
    return 0
