"""``tfnhr recognize``: the text of image files (PNG/JPEG) with a trained recognizer, as plain
text, TSV, JSON or JSON lines, on stdout or into a file; or the text lines of pages, written back
into their PAGE-XML/ALTO files (``--pages``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tfnhr.config.choices import DEFAULT_BATCH_PIXELS, DEVICES, RECOGNIZE_FORMATS
from tfnhr.commands.common import (add_decoder_choice, add_decoding_processes, reports_errors, transcriber_from_args,
                                   use_device)
from tfnhr.config.options import DefaultsHelpFormatter
from tfnhr.config.ranges import COUNT


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``recognize`` to the ``tfnhr`` sub-commands."""
    parser = commands.add_parser(
        "recognize", help="print the text of images", description=" ".join(__doc__.split()),
        formatter_class=DefaultsHelpFormatter)
    parser.add_argument("images", nargs="*", type=Path, metavar="IMAGE", help="text-line or word images")
    parser.add_argument("--pages", nargs="+", type=Path, default=None, metavar="DIR_OR_FILE",
                        help="instead of IMAGEs: a folder of page images with PAGE-XML/ALTO files (searched "
                             "recursively), or such files; every TextLine is recognized and the files are written "
                             "to --out with the text filled in (lines must be segmented already)")
    parser.add_argument("--model", type=Path, required=True, help="a saved model (best.keras)")
    parser.add_argument("--format", choices=RECOGNIZE_FORMATS, default="tsv",
                        help="text: the text only, one line per image; tsv: path, text and confidence; json: one "
                             "array of objects; jsonl: one object per line (path, text, confidence, words and chars with "
                             "their pixel columns and confidences under greedy decoding, or error)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the results here instead of stdout; with --pages: the folder for the filled "
                             "layout files (required; the same folder as the input overwrites them)")
    parser.add_argument("--batch-pixels", type=COUNT.type, default=DEFAULT_BATCH_PIXELS,
                        help="pixel budget of one model call (images scaled to the model's height)")
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help="auto: a GPU if TensorFlow sees one, else the CPU; gpu: fail without one")
    add_decoder_choice(parser)
    add_decoding_processes(parser)
    parser.set_defaults(run=run)


def format_results(results: list[dict], fmt: str) -> str:
    """The results (``{"path", "text", "confidence"}``, or ``{"path", "error"}``; a ``warning``
    may come with an empty text) in ``fmt`` (:data:`tfnhr.config.choices.RECOGNIZE_FORMATS`). ``text``
    and ``tsv`` leave out images that could not be read (their errors go to stderr)."""
    if fmt == "json":
        return json.dumps(results, indent=1, ensure_ascii=False) + "\n"
    if fmt == "jsonl":
        return "".join(json.dumps(result, ensure_ascii=False) + "\n" for result in results)
    read = [result for result in results if "error" not in result]
    if fmt == "text":
        return "".join(result["text"] + "\n" for result in read)
    return "".join(f"{result['path']}\t{result['text']}\t{result['confidence']:.3f}\n" for result in read)


@reports_errors("recognize")
def run(args: argparse.Namespace) -> int:
    """Recognize the images or, with ``--pages``, the pages."""
    if args.pages is not None:
        if args.images:
            raise ValueError("give IMAGEs or --pages, not both")
        if args.out is None:
            raise ValueError("--pages needs --out FOLDER for the filled PAGE-XML/ALTO files")
        return run_pages(args)
    if not args.images:
        raise ValueError("no input: give IMAGE files or --pages DIR_OR_FILE")
    return run_images(args)


def _transcriber(args: argparse.Namespace):
    use_device(args.device)
    from tfnhr.models import load_recognizer

    model = load_recognizer(args.model)
    return transcriber_from_args(model, args)


def run_pages(args: argparse.Namespace) -> int:
    """Fill the layout files of ``--pages`` into ``--out``; print a JSON summary. Skipped lines,
    pages and files are counted in warnings; exit status 1 when a page was skipped (or none was
    filled), 0 when every page was."""
    from tfnhr.data.pages.reading import PAGE_SKIPS
    from tfnhr.recognition.pages import page_sources, recognize_pages

    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"--out {args.out} is a file: with --pages it is the folder for the filled layout files")
    sources = page_sources(args.pages[0] if len(args.pages) == 1 and args.pages[0].is_dir() else args.pages)
    transcriber = _transcriber(args)  # after the layout files were found: bad paths fail at once
    summary, skips = recognize_pages(sources, args.out, transcriber.read, progress=True)
    skips.warn("--pages")
    print(json.dumps(summary.to_json(), indent=1))
    skipped_pages = sum(skips.count(kind) for kind in PAGE_SKIPS)
    return 0 if summary.pages and not skipped_pages else 1


def run_images(args: argparse.Namespace) -> int:
    """Recognize every image, in the order given. Unreadable files are reported (stderr, and an
    ``error`` in JSON) and make the exit status 1; the other images are still recognized. Images
    too small to read get an empty text, confidence 0 and a warning."""
    from tfnhr.data.images import ImageReadError, load_gray, unreadable_reason

    transcriber = _transcriber(args)
    results: list[dict] = []
    readable: list[tuple[dict, object]] = []
    for path in args.images:
        result = {"path": str(path)}
        results.append(result)
        try:
            gray = load_gray(path)
        except ImageReadError as error:
            result["error"] = str(error)
            print(f"tfnhr recognize: error: {error}", file=sys.stderr)
            continue
        reason = unreadable_reason(gray)
        if reason is not None:
            result.update(text="", confidence=0.0, warning=reason)
            print(f"tfnhr recognize: warning: {path}: {reason}", file=sys.stderr)
        else:
            readable.append((result, gray))
    readings = transcriber.read([gray for _, gray in readable]) if readable else []
    for (result, _), reading in zip(readable, readings):
        result.update(text=reading.text, confidence=round(reading.confidence, 4), **reading.spans_json())
    output = format_results(results, args.format)
    if args.out is None:
        sys.stdout.write(output)
    else:
        args.out.write_text(output, encoding="utf-8")
    return 1 if any("error" in result for result in results) else 0
