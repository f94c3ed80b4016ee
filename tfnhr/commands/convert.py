"""``tfnhr convert``: write a folder in IAM layout (IAM or ``tfnhr synth``) or a pages folder
(PAGE-XML/ALTO) as one HDF5 file that ``tfnhr train/evaluate --data`` load in one read."""

from __future__ import annotations

import argparse
from pathlib import Path

from tfnhr.config.choices import COMPRESSIONS, DATA_KINDS, SOURCES, SUBSETS
from tfnhr.commands.common import reports_errors
from tfnhr.config.options import DefaultsHelpFormatter
from tfnhr.config.ranges import COUNT


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``convert`` to the ``tfnhr`` sub-commands."""
    parser = commands.add_parser(
        "convert", help="convert an IAM-layout or pages folder into an HDF5 data set file",
        description="Read the images and transcriptions of an IAM-layout folder (IAM, or a tfnhr synth "
                    "set) or the text lines of a pages folder (PAGE-XML/ALTO) subset by subset and write them, gray levels and all, into one HDF5 file "
                    "(groups train/val/test with inputs, seqLengths, offsets, seqTags, labels).",
        formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--from", dest="source", choices=SOURCES, required=True,
                        help="what the folder is: IAM (or any folder in its layout; also for pages "
                             "folders) or a tfnhr synth set")
    parser.add_argument("folder", type=Path, help="the folder in IAM layout, or a pages folder")
    parser.add_argument("--out", type=Path, required=True, help="HDF5 file to write (.h5 or .hdf5)")
    parser.add_argument("--kind", choices=DATA_KINDS, default="lines",
                        help="IAM line or word images, or lines cut from pages (detected for a pages folder)")
    parser.add_argument("--split", default="official",
                        help="'official', 'seeded:SEED' (pages) or a folder with train/valid/test id lists "
                             "(as for tfnhr train)")
    parser.add_argument("--keep-err", action="store_true", help="keep rows whose IAM segmentation is 'err'")
    parser.add_argument("--subsets", nargs="+", choices=SUBSETS, default=list(SUBSETS), help="subsets to write")
    parser.add_argument("--height", type=COUNT.type, default=None,
                        help="scale images to this height (px) before storing; none: keep their sizes")
    parser.add_argument("--compression", choices=COMPRESSIONS, default="none",
                        help="of the pixels: gzip makes smaller files that load several times slower")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


@reports_errors("convert")
def run(args: argparse.Namespace) -> int:
    """Convert and print a summary line; exit status 2 with one line for bad input."""
    from tfnhr.data.sources import convert_to_hdf5

    summary = convert_to_hdf5(args.folder, args.out, args.source, args.subsets, kind=args.kind,
                              split=args.split, keep_err=args.keep_err, height=args.height,
                              compression=args.compression, progress=not args.quiet)
    counts = ", ".join(f"{subset} {figures['examples']}" for subset, figures in summary["subsets"].items())
    what = "lines from pages" if summary["kind"] == "pages" else summary["kind"]
    print(f"wrote {summary['out']}: {counts} {what}, {summary['pixels']:,} pixels, "
          f"{summary['bytes'] / 1e6:.1f} MB, {summary['seconds']:.1f} s")
    return 0
