"""The main job (``make demo``): train an MDLSTM recognizer on the embedded synthetic handwriting
set on CPU and report validation CER/WER on held-out fonts, greedy and with an LM.

Steps, all under ``--out`` (default ``runs/main``):

1. ``synth/``: synthetic lines in the IAM layout (the preset's training fonts for train, held-out
   fonts for validation and test; :mod:`tfnhr.data.synthetic.handwriting`), drawn in one worker process per core.
2. ``lm.arpa``: a word 3-gram LM (modified Kneser-Ney) of the synthetic corpus's training text
   in lower-case tokens (:mod:`tfnhr.lm.tokens`), its unseen words backed by the 100,000 most
   frequent English words (:mod:`tfnhr.lm.background`).
3. ``model/``: :func:`tfnhr.training.train` (CTC without a confidence penalty
   (:data:`CONFIDENCE_PENALTY`), Adam 0.005, clipping 10, training-time augmentation, no dropout
   (:data:`DROPOUT`), validation every 100 updates, LR halving on validation CER/WER once the
   model reads), stopped by a time limit; ``model/best.keras`` is the best validation's model,
   ``model/curves.png`` its loss and validation CER.
4. Validation and test CER/WER of the best model: greedy and beam search + LM, each reading a
   line once and with the width ensemble (:mod:`tfnhr.recognition.views`: 8 widths x 3 shears), in
   all and per font (the beam searches in one worker process per core);
   ``main.json``; a few test lines printed with their reference and recognition, and drawn in
   ``samples.png``.

Training runs in this process on every core (the compiled MDLSTM scan runs its four directions
on TensorFlow's intra-op threads). ``--workers N`` trains N single-threaded Horovod workers
instead, which average their gradients every step: on 2 cores they train about as many lines per
second, but in half the updates, and reached a worse CER in 14 training minutes
(docs/lab/main-job.md).

``--preset quick`` (default) fits in 20 minutes on 2 cores and trains ``small-stem`` on the core
training fonts; ``--preset full`` fits in an hour, training the larger ``stem-80`` 49 minutes on
more lines of all bundled training fonts for lower error rates (:data:`tfnhr.config.choices.MAIN_JOB_PRESETS`;
the measured ones: docs/results.md#main-job-make-demo, docs/results.md#full-main-job-make-demo-full).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tfnhr.runtime.console import quiet_libraries

if __name__ == "__main__":  # python -m tfnhr.commands.main_job: before the imports below load TensorFlow
    quiet_libraries("tfnhr.commands.main_job")

from tfnhr.config.choices import (AUGMENT_LEVELS, ENSEMBLE_SHEARS, ENSEMBLE_WIDTHS, MAIN_JOB_BATCH_PIXELS,
                                  MAIN_JOB_BLOCKS, MAIN_JOB_HEIGHT, MAIN_JOB_PIXELS_PER_LINE, MAIN_JOB_PRESETS,
                                  MODEL_PRESETS, TRAIN_FONT_SETS)
from tfnhr.config.options import DefaultsHelpFormatter, declaration, option_flags
from tfnhr.data.synthetic import handwriting, iam_writer
from tfnhr.data.samples import TextImageSet
from tfnhr.data.sources import load_data_subset
from tfnhr.decoding import Decoder, make_decoder
from tfnhr.evaluation.tables import evaluate_set, format_table
from tfnhr.recognition.transcriber import Transcriber
from tfnhr.lm import background_frequencies, build_arpa, token_sentence
from tfnhr.evaluation.metrics import error_rate
from tfnhr.models import CtcModel, load_recognizer
from tfnhr.evaluation.plots import plot_samples
from tfnhr.runtime.stack import usable_cores
from tfnhr.training import TrainOptions, train
from tfnhr.training.workers import run_local_workers

ENSEMBLE_NAME = f"{len(ENSEMBLE_WIDTHS)} widths x {len(ENSEMBLE_SHEARS)} shears"
"""How the width ensemble's rows are marked in the tables and ``main.json``."""

SAMPLE_LINES = 8
"""Test lines shown in ``samples.png`` (the first few also printed)."""

DROPOUT = 0.0
"""Dropout on the MDLSTM outputs in the main job (``tfnhr train``'s default is 0.25). Without
dropout a 14-minute run with 20 training fonts read the held-out fonts 2.5-2.8 points better
(docs/lab/fonts-and-data.md#training-fonts); on real handwritten digits dropout helps, so
``tfnhr train`` keeps it."""

CONFIDENCE_PENALTY = 0.0
"""Weight of the output columns' entropy subtracted from the CTC loss in the main job (``tfnhr
train``'s default is 0.1, which read unseen handwritten digits better): on the main job's held-out
fonts 0.1 read 0.8 points worse in 24 views in a ``make demo`` run (docs/lab/training-recipe.md,
"Confidence penalty")."""


def _preset_values(key: str) -> str:
    """``"full 49, quick 15"``: what each preset sets ``key`` to."""
    values = {name: preset[key] for name, preset in MAIN_JOB_PRESETS.items()}
    return ", ".join(f"{name} {value if isinstance(value, str) else f'{value:g}'}"
                     for name, value in sorted(values.items()))


def build_parser() -> argparse.ArgumentParser:
    """The main job's options."""
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()),
                                     formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--preset", choices=sorted(MAIN_JOB_PRESETS), default="quick",
                        help="data sizes, training time, recognizer and training fonts (quick: about 20 min in all "
                             "on 2 cores; full: about an hour)")
    parser.add_argument("--out", type=Path, default=Path("runs/main"),
                        help="folder for synth/, lm.arpa, model/, main.json and samples.png")
    parser.add_argument("--time-limit", type=float, default=None,
                        help=f"training minutes (default: the preset's, {_preset_values('time_limit')})")
    for subset in ("train", "val", "test"):
        parser.add_argument(f"--{subset}", type=int, default=None,
                            help=f"{subset} lines (default: the preset's, {_preset_values(subset)})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic lines, the weights and the shuffling")
    parser.add_argument("--augment", choices=AUGMENT_LEVELS, default="default", help="training-time augmentation")
    parser.add_argument("--model", choices=MODEL_PRESETS, default=None,
                        help=f"recognizer size (tfnhr.models.recognizer.PRESETS; default: the preset's, "
                             f"{_preset_values('model')}; small-stem's convolutional stem makes rounds 1.2x shorter "
                             f"than small-wide's, tfnhr train's default)")
    parser.add_argument("--train-fonts", choices=TRAIN_FONT_SETS, default=None,
                        help=f"training hands (default: the preset's, {_preset_values('train_fonts')}); the held-out "
                             f"fonts are the same")
    parser.add_argument("--anneal", type=declaration(TrainOptions, "anneal").range.type, default=argparse.SUPPRESS,
                        metavar="FRACTION",
                        help=f"lower the learning rate linearly to 1/20 from this fraction of the time limit on; "
                             f"'none': keep it (default: the preset's, {_preset_values('anneal')})")
    parser.add_argument("--dropout", type=declaration(TrainOptions, "dropout").range.type, default=DROPOUT,
                        help="dropout on MDLSTM outputs")
    parser.add_argument("--confidence-penalty", type=declaration(TrainOptions, "confidence_penalty").range.type,
                        default=CONFIDENCE_PENALTY, metavar="WEIGHT", help="weight of the output columns' entropy subtracted from the CTC loss")
    parser.add_argument("--batch-pixels", type=int, default=MAIN_JOB_BATCH_PIXELS,
                        help=f"pixel budget of one batch (of each worker's with --workers; {MAIN_JOB_HEIGHT}-px lines take "
                             f"about {MAIN_JOB_PIXELS_PER_LINE:,} each)")
    parser.add_argument("--normalize-spacing", action="store_true",
                        help="scale each line's width to the training lines' median stroke spacing (not a gain "
                             "at this budget: docs/lab/fonts-and-data.md)")
    parser.add_argument("--workers", type=int, default=1,
                        help="training processes: 1 trains in this process on every core, more start "
                             "that many single-threaded Horovod workers")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The main job's options from ``argv`` (``None``: the command line), checked."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    if args.batch_pixels < MAIN_JOB_PIXELS_PER_LINE:
        parser.error(f"--batch-pixels must hold at least one line ({MAIN_JOB_PIXELS_PER_LINE}), got {args.batch_pixels}")
    for key in ("model", "train_fonts"):
        if getattr(args, key) is None:
            setattr(args, key, MAIN_JOB_PRESETS[args.preset][key])
    if not hasattr(args, "anneal"):  # not given: 'none' (no annealing) parses to None as well
        args.anneal = MAIN_JOB_PRESETS[args.preset]["anneal"]
    return args


def validation_interval(lines: int, batch_pixels: int, workers: int) -> int:
    """Updates between validations so that about ``lines`` training lines pass between them."""
    return max(1, lines // (batch_pixels // MAIN_JOB_PIXELS_PER_LINE * workers))


def training_options(args: argparse.Namespace, data: Path, epochs: int, time_limit: float,
                     validate_lines: int) -> TrainOptions:
    """What the main job trains with: the parsed arguments ``args`` on the synthetic set ``data``,
    validating about every ``validate_lines`` training lines."""
    return TrainOptions(
        data=data, out=args.out / "model", preset=args.model, block=MAIN_JOB_BLOCKS, height=MAIN_JOB_HEIGHT,
        batch_pixels=args.batch_pixels, epochs=epochs, time_limit=time_limit, seed=args.seed,
        augment=args.augment, dropout=args.dropout, confidence_penalty=args.confidence_penalty,
        normalize_spacing=args.normalize_spacing, anneal=args.anneal, overwrite=True,
        validate_every=validation_interval(validate_lines, args.batch_pixels, args.workers))


def train_with_workers(options: TrainOptions, workers: int) -> dict:
    """:func:`tfnhr.training.train` as ``workers`` single-threaded Horovod processes on this
    machine (:func:`tfnhr.training.workers.run_local_workers`); returns the run's ``summary.json``."""
    try:
        run_local_workers(option_flags(options), workers)
    except RuntimeError as error:
        raise SystemExit(str(error)) from None
    return json.loads((Path(options.out) / "summary.json").read_text())


def main(argv: Sequence[str] | None = None) -> int:
    quiet_libraries("tfnhr.commands.main_job")  # warnings on one line, as the tfnhr command prints them
    args = parse_args(argv)
    preset = {**MAIN_JOB_PRESETS[args.preset],
              **{key: getattr(args, key) for key in ("train", "val", "test") if getattr(args, key) is not None}}
    started = time.monotonic()

    data = args.out / "synth"
    font_count = len(handwriting.font_paths("train", args.train_fonts))
    print(f"[1/4] synthetic lines: {preset['train']} train (fonts: {args.train_fonts}, {font_count}), "
          f"{preset['val']} val, {preset['test']} test -> {data}", flush=True)
    iam_writer.write_iam_layout(data, {"train": preset["train"], "val": preset["val"], "test": preset["test"]},
                               kind="lines", seed=args.seed, train_fonts=args.train_fonts, processes=usable_cores())
    print(f"[2/4] word 3-gram LM of the training text, English word frequencies for the words it lacks "
          f"-> {args.out / 'lm.arpa'}", flush=True)
    lm_stats = build_lm(args.out / "lm.arpa")
    time_limit = args.time_limit if args.time_limit is not None else preset["time_limit"]
    workers = args.workers
    where = "in this process on every core" if workers == 1 else f"on {workers} Horovod workers"
    print(f"[3/4] training the {args.model} recognizer {where} on lines scaled to {MAIN_JOB_HEIGHT} px "
          f"(time limit {time_limit} min)", flush=True)
    options = training_options(args, data, preset["epochs"], time_limit, preset["validate_lines"])
    summary = train(options) if workers == 1 else train_with_workers(options, workers)
    print("[4/4] evaluating the best model on held-out fonts", flush=True)
    results = {"preset": args.preset, "model": args.model, "train_fonts": args.train_fonts, "training": summary,
               "lm": {k: lm_stats[k] for k in ("vocabulary", "background", "ngrams")}}
    model = load_recognizer(args.out / "model" / "best.keras")
    decoders = {name: make_decoder(name, model.charset, lm=args.out / "lm.arpa", processes=usable_cores())
                for name in ("greedy", "beam+lm")}
    for subset in ("val", "test"):
        results[subset] = evaluate_subset(model, data, subset, decoders, args.out / "model" / f"{subset}.json")
    show_samples(model, load_data_subset(data, "test", limit=SAMPLE_LINES), args.out / "samples.png")
    results["minutes"] = round((time.monotonic() - started) / 60, 1)
    (args.out / "main.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"\nmodel saved at {args.out / 'model' / 'best.keras'}; results in {args.out / 'main.json'}; "
          f"curves in {args.out / 'model' / 'curves.png'}; {results['minutes']} min in all")
    return 0


def build_lm(out_path: Path) -> dict:
    """The main job's LM (step 2), written to ``out_path``: a word 3-gram of the synthetic
    corpus's training text in lower-case tokens, its unigrams backed by English word frequencies;
    :func:`tfnhr.lm.build_arpa`'s statistics."""
    return build_arpa(map(token_sentence, handwriting.corpus_text("train").splitlines()), order=3, out_path=out_path,
                      background=background_frequencies("en"))


def evaluate_subset(model: CtcModel, data: Path, subset: str, decoders: Mapping[str, Decoder], out: Path) -> list[dict]:
    """Print and return the CER/WER of ``decoders`` (the main job's greedy and beam+LM) on ``subset`` (the table
    ``tfnhr evaluate`` prints), read once and with the width ensemble
    at every width of :data:`~tfnhr.config.choices.ENSEMBLE_WIDTHS` and shear of
    :data:`~tfnhr.config.choices.ENSEMBLE_SHEARS` (rows named ``"greedy, 8 widths x 3 shears"`` etc.), each row
    with its CER per font (``"cer_by_font"``: font file ->
    CER, from the set's :data:`~tfnhr.data.synthetic.iam_writer.FONTS_FILE`); the JSON table is kept in
    ``out``."""
    examples = load_data_subset(data, subset)
    rows, transcriptions = evaluate_set(model, examples, decoders)
    ensemble_rows, ensemble_transcriptions = evaluate_set(model, examples, decoders, widths=ENSEMBLE_WIDTHS,
                                                            shears=ENSEMBLE_SHEARS)
    for row in ensemble_rows:
        transcriptions[f"{row.decoder}, {ENSEMBLE_NAME}"] = ensemble_transcriptions[row.decoder]
        row.decoder = f"{row.decoder}, {ENSEMBLE_NAME}"
    rows += ensemble_rows
    fonts = iam_writer.read_fonts(data)
    lines_of_font: dict[str, list[int]] = {}
    for index, example_id in enumerate(examples.ids):
        lines_of_font.setdefault(fonts.get(example_id, "unknown"), []).append(index)
    table = [{**row.__dict__, "cer_by_font": {
        font: error_rate([examples.texts[i] for i in indices], [transcriptions[row.decoder][i] for i in indices])
        for font, indices in sorted(lines_of_font.items())}} for row in rows]
    print(f"{subset}: {len(examples)} lines of {data}")
    print(format_table(rows))
    for row in table:
        print(f"  {row['decoder']} CER by font: " + ", ".join(
            f"{font} {cer:.1%} ({len(lines_of_font[font])} lines)" for font, cer in row["cer_by_font"].items()))
    out.write_text(json.dumps(table, indent=1) + "\n")
    return table


def show_samples(model: CtcModel, examples: TextImageSet, out_png: Path, printed: int = 4) -> None:
    """Print the first ``printed`` lines of ``examples`` with their reference and greedy
    recognition, and draw all of them into ``out_png``."""
    hypotheses = Transcriber(model).transcribe(examples.images)
    errors = [error_rate([reference], [hypothesis]) for reference, hypothesis in zip(examples.texts, hypotheses)]
    for reference, hypothesis in list(zip(examples.texts, hypotheses))[:printed]:
        print(f"  ref:  {reference}\n  read: {hypothesis}")
    plot_samples(examples.images, examples.texts, hypotheses, out_png, errors)
    print(f"{len(examples)} test lines with their recognition drawn in {out_png}")


if __name__ == "__main__":
    raise SystemExit(main())
