"""A trained recognizer's held-out lines decoded with a word LM of the text as written vs an LM
of lower-case tokens backed by English word frequencies; each read once and in the main job's
24 views, the views' readings weighed by their likelihood alone or with the LM as well.

Both LMs are estimated here from the same training text
(:func:`tfnhr.data.synthetic.handwriting.corpus_text`): **as written** (words split on
whitespace, case and punctuation kept, unigrams interpolated with the uniform distribution) and
**tokens + background** (the main job's own, :func:`tfnhr.commands.main_job.build_lm`: lower-case tokens,
unigrams interpolated with the 100,000 most frequent English words' frequencies).
Both decode with the main job's beam search (width 25, ``alpha`` 0.5, ``beta`` 1). The model's
column scores of every view are computed once and decoded by every decoder, so the rows differ
in decoding alone. Rows, per subset (``val``, ``test``) of a main job's run folder:

* ``once``: each line read once (width 1, no shear);
* ``24 views, likelihood``: the views' readings weighed by their CTC likelihood under a mixture
  of the views (:func:`tfnhr.recognition.views.agreed_readings` without LM scores);
* ``24 views, with LM``: the same plus the decoder's ``reading_scores`` (what ``tfnhr evaluate``
  and the main job do; zero for greedy decoding and for the LM as written).

Usage (a run folder of ``make demo`` / ``make demo-full``; about 4 minutes per 400 lines on 2 cores
for the 24 views' scores, 1-2 minutes per LM for the beam searches)::

    python benchmarks/lm_decoding.py --run runs/main-full [--threads 2] [--out lm.json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import _harness

BEAM_ROWS = ("once", "24 views, likelihood", "24 views, with LM")


def decoder_rows(decoder, view_scores, references, charset, once: int) -> dict[str, float]:
    """CER of ``decoder`` on the views' scores: read once (view ``once``), and in all views weighed
    by likelihood alone and with the decoder's reading scores."""
    from tfnhr.evaluation.metrics import error_rate
    from tfnhr.recognition.views import agreed_readings

    view_texts = [decoder.decode_batch(scores) for scores in view_scores]
    by_likelihood, _ = agreed_readings(view_scores, view_texts, charset)
    weighed, _ = agreed_readings(view_scores, view_texts, charset, decoder.reading_scores)
    return {"once": error_rate(references, view_texts[once]),
            "24 views, likelihood": error_rate(references, by_likelihood),
            "24 views, with LM": error_rate(references, weighed)}


def measure(args: argparse.Namespace) -> dict:
    _harness.set_threads(args.threads)
    from tfnhr.config.choices import ENSEMBLE_SHEARS, ENSEMBLE_WIDTHS
    from tfnhr.data.synthetic import handwriting
    from tfnhr.data.sources import load_data_subset
    from tfnhr.decoding import make_decoder
    from tfnhr.recognition.transcriber import Transcriber
    from tfnhr.lm import build_arpa
    from tfnhr.commands.main_job import build_lm
    from tfnhr.models import load_recognizer
    from tfnhr.recognition.views import View

    model = load_recognizer(args.run / "model" / "best.keras")
    transcriber = Transcriber(model, widths=ENSEMBLE_WIDTHS, shears=ENSEMBLE_SHEARS)
    once = transcriber.views.index(View(1.0, 0.0))
    report: dict = {"run": str(args.run), "subsets": {}}
    with tempfile.TemporaryDirectory(prefix="lm_decoding_") as folder:
        written, tokens = Path(folder) / "written.arpa", Path(folder) / "tokens.arpa"
        written_stats = build_arpa(handwriting.corpus_text("train").splitlines(), order=3, out_path=written)
        tokens_stats = build_lm(tokens)
        report["lms"] = {"as written": {"vocabulary": written_stats["vocabulary"]},
                         "tokens + background": {"vocabulary": tokens_stats["vocabulary"],
                                                 "background": tokens_stats["background"]}}
        decoders = {"greedy": make_decoder("greedy", model.charset),
                    "beam+LM as written": make_decoder("beam+lm", model.charset, lm=written),
                    "beam+LM tokens + background": make_decoder("beam+lm", model.charset, lm=tokens)}
        for subset in ("val", "test"):
            examples = load_data_subset(args.run / "synth", subset)
            _harness.log(f"{subset}: the model's scores of {len(examples)} lines in {len(transcriber.views)} views")
            view_scores = transcriber.view_scores(examples.images)
            rows = {}
            for name, decoder in decoders.items():
                _harness.log(f"{subset}: decoding with {name}")
                rows[name] = decoder_rows(decoder, view_scores, examples.texts, model.charset, once)
            report["subsets"][subset] = {"lines": len(examples), "cer": rows}
            print_table(subset, rows)
    return report


def print_table(subset: str, rows: dict[str, dict[str, float]]) -> None:
    """The CERs of one subset, and the ratio of the two LMs' (tokens + background / as written)."""
    print(f"\n{subset}: CER")
    print(f"{'decoder':<30}" + "".join(f"{column:>24}" for column in BEAM_ROWS))
    for name, row in rows.items():
        print(f"{name:<30}" + "".join(f"{row[column]:>24.2%}" for column in BEAM_ROWS))
    old, new = rows["beam+LM as written"], rows["beam+LM tokens + background"]
    print(f"{'ratio (tokens / as written)':<30}" + "".join(
        f"{new[column] / old[column] if old[column] else float('nan'):>24.3f}" for column in BEAM_ROWS))


def main(argv: list[str] | None = None) -> int:
    parser = _harness.parser(__doc__, threads=2)
    parser.add_argument("--run", type=Path, required=True,
                        help="a main job's output folder (with synth/ and model/best.keras)")
    args = parser.parse_args(argv)
    if not (args.run / "model" / "best.keras").is_file() or not (args.run / "synth").is_dir():
        parser.error(f"{args.run} is not a main job's output folder (no model/best.keras or synth/)")
    return _harness.main(measure, args)


if __name__ == "__main__":
    sys.exit(main())
