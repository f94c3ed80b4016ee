"""``tfnhr recognize``: the text of image files (PNG/JPEG) with a trained recognizer, as plain
text, TSV, JSON or JSON lines, on stdout or into a file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tfnhr.choices import DEFAULT_BATCH_PIXELS, DEVICES, RECOGNIZE_FORMATS
from tfnhr.commands.common import add_decoder_choice, decoder_from_args, reports_errors, use_device
from tfnhr.ranges import COUNT


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``recognize`` to the ``tfnhr`` sub-commands."""
    parser = commands.add_parser(
        "recognize", help="print the text of images", description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("images", nargs="+", type=Path, metavar="IMAGE", help="text-line or word images")
    parser.add_argument("--model", type=Path, required=True, help="a saved model (best.keras)")
    parser.add_argument("--format", choices=RECOGNIZE_FORMATS, default="tsv",
                        help="text: the text only, one line per image; tsv: path, text and confidence; json: one "
                             "array of objects; jsonl: one object per line (path, text, confidence, or error)")
    parser.add_argument("--out", type=Path, default=None, help="write the results here instead of stdout")
    parser.add_argument("--batch-pixels", type=COUNT.type, default=DEFAULT_BATCH_PIXELS,
                        help="pixel budget of one model call (images scaled to the model's height)")
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help="auto: a GPU if TensorFlow sees one, else the CPU; gpu: fail without one")
    add_decoder_choice(parser)
    parser.set_defaults(run=run)


def format_results(results: list[dict], fmt: str) -> str:
    """The results (``{"path", "text", "confidence"}``, or ``{"path", "error"}``; a ``warning``
    may come with an empty text) in ``fmt`` (:data:`tfnhr.choices.RECOGNIZE_FORMATS`). ``text``
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
    """Recognize every image, in the order given. Unreadable files are reported (stderr, and an
    ``error`` in JSON) and make the exit status 1; the other images are still recognized. Images
    too small to read get an empty text, confidence 0 and a warning."""
    use_device(args.device)
    from tfnhr.data.images import ImageReadError, load_gray, unreadable_reason
    from tfnhr.inference import Transcriber
    from tfnhr.models import load_recognizer

    model = load_recognizer(args.model)
    transcriber = Transcriber(model, decoder_from_args(args.decoder, args, model.charset), args.batch_pixels)
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
    recognized = transcriber.recognize([gray for _, gray in readable]) if readable else []
    for (result, _), (text, confidence) in zip(readable, recognized):
        result.update(text=text, confidence=round(float(confidence), 4))
    output = format_results(results, args.format)
    if args.out is None:
        sys.stdout.write(output)
    else:
        args.out.write_text(output, encoding="utf-8")
    return 1 if any("error" in result for result in results) else 0
