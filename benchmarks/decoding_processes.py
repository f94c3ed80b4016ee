"""Beam search + LM over the width ensemble's views: in this process against spread over worker
processes (``BeamSearchDecoder(processes=N)``, :mod:`tfnhr.decoding.processes`), in one run.

The main job's evaluation reads its 200 validation lines in 24 views (8 widths x 3 shears) and
decodes every view's scores with the beam search and its LM: 4,800 searches, Python code on one
core. This benchmark scores synthetic validation lines (the held-out validation fonts at the main
job's 36 px) once with a trained model, then decodes the same view scores with
:func:`tfnhr.recognition.views.decode_views` both ways, in interleaved rounds (the pool started in
an untimed first round, whose start-up is reported apart). The texts of both sides must be the
same. Reported: median seconds and range per side and their ratio.

The LM is the main job's (``tfnhr.commands.main_job.build_lm``, written to a temporary folder) unless
``--lm`` names one. A trained model is needed (an untrained one's flat scores make the search
trivially short): ``make demo`` writes ``runs/main/model/best.keras``.

    .venv/bin/python benchmarks/decoding_processes.py --model runs/main/model/best.keras --out dec.json
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import _harness
from tfnhr.config.choices import ENSEMBLE_SHEARS, ENSEMBLE_WIDTHS, MAIN_JOB_BATCH_PIXELS, MAIN_JOB_HEIGHT
from tfnhr.runtime.stack import usable_cores


def measure(args) -> dict:
    _harness.set_threads(args.threads)
    from tfnhr.data.synthetic import handwriting
    from tfnhr.data.images import scale_to_height
    from tfnhr.decoding import make_decoder
    from tfnhr.recognition.transcriber import Transcriber
    from tfnhr.commands.main_job import build_lm
    from tfnhr.models import load_recognizer
    from tfnhr.recognition.views import decode_views

    model = load_recognizer(args.model)
    lines = [scale_to_height(image, MAIN_JOB_HEIGHT)
             for image, _ in handwriting.generate(args.lines, seed=args.seed, kind="lines", split="val")]
    transcriber = Transcriber(model, batch_pixels=MAIN_JOB_BATCH_PIXELS, widths=ENSEMBLE_WIDTHS,
                              shears=ENSEMBLE_SHEARS)
    parts = list(transcriber.view_score_parts(lines))
    with tempfile.TemporaryDirectory() as folder:
        lm = Path(args.lm) if args.lm else Path(folder) / "lm.arpa"
        if not args.lm:
            build_lm(lm)
        decoders = {processes: make_decoder("beam+lm", model.charset, lm=lm, processes=processes)
                    for processes in (1, args.processes)}
        texts = {}

        def decode_all(processes: int) -> None:
            texts[processes] = [text for view_scores in parts
                                for text in decode_views(decoders[processes], view_scores, model.charset)[0]]

        started = time.perf_counter()
        decode_all(args.processes)
        first_s = time.perf_counter() - started
        times = _harness.interleaved({p: lambda p=p: decode_all(p) for p in decoders}, rounds=args.rounds)
        decoders[args.processes].close()
    if texts[1] != texts[args.processes]:
        raise SystemExit("the two sides read different texts")
    one, many = _harness.spread(times[1].wall), _harness.spread(times[args.processes].wall)
    views = len(ENSEMBLE_WIDTHS) * len(ENSEMBLE_SHEARS)
    report = {"lines": len(lines), "views": views, "searches": len(lines) * views, "model": args.model,
              "processes": args.processes, "usable_cores": usable_cores(), "first_call_s": first_s,
              "in_process": one, "pool": many, "ratio": one["median"] / many["median"]}
    print(f"{len(lines)} validation lines at {MAIN_JOB_HEIGHT} px in {views} views: {len(lines) * views} beam "
          f"searches with the LM; the pool's first call (workers starting) took {first_s:.2f} s")
    print(f"{'in this process s':>24s} {f'{args.processes} processes s':>24s} {'ratio':>8s}")
    print(" ".join(f"{side['median']:8.2f} ({side['min']:.2f}-{side['max']:.2f})".rjust(24) for side in (one, many))
          + f" {report['ratio']:7.2f}x")
    return report


if __name__ == "__main__":
    parser = _harness.parser(__doc__, rounds=3, threads=2)
    parser.add_argument("--model", required=True, help="a saved .keras recognizer (make demo's: runs/main/model/best.keras)")
    parser.add_argument("--lm", help="an ARPA LM (default: the main job's, built here)")
    parser.add_argument("--lines", type=int, default=200, help="validation lines (default 200)")
    parser.add_argument("--processes", type=int, default=usable_cores(),
                        help="worker processes of the pool side (default: every usable core)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic lines (default 0)")
    raise SystemExit(_harness.main(measure, parser.parse_args()))
