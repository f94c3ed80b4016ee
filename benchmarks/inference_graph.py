"""Reading lines with the recognizer: eager model calls against the one traced graph per model that
:class:`tfnhr.recognition.transcriber.Transcriber` runs (:func:`tfnhr.recognition.transcriber.inference_graph`),
in one run.

Both read the same synthetic validation lines (the held-out validation fonts, scaled to the main
job's 36 px) in the same batches (the main job's 190,000-pixel budget): per round, a
validation's worth of lines (``--lines``, 200 as in the main job's validation rounds) and one
line alone (a ``tfnhr recognize`` / service request), each side in turn, so that load from other
processes hits both alike. Reported: median seconds and range of ``--rounds`` rounds per side,
their ratio, and the graph's first call (its trace). The scores of both sides are compared (they
must agree to float32 rounding).

Without ``--model`` the main job's recognizer (``small-stem``, 2x2 blocks, untrained: the time
does not depend on the weights) is built; with it, a saved ``.keras`` model is read.

    taskset -c 0 .venv/bin/python benchmarks/inference_graph.py --threads 1 --out graph1.json
    .venv/bin/python benchmarks/inference_graph.py --threads 2 --model runs/main/model/best.keras
"""

from __future__ import annotations

import time

import numpy as np

import _harness
from tfnhr.config.choices import MAIN_JOB_BATCH_PIXELS, MAIN_JOB_BLOCKS, MAIN_JOB_HEIGHT


def recognizer(path: str | None):
    """The saved model at ``path``, or the main job's untrained recognizer."""
    from tfnhr.charset import Charset
    from tfnhr.data.synthetic import handwriting
    from tfnhr.models import build_recognizer, load_recognizer

    if path:
        return load_recognizer(path)
    charset = Charset.from_texts([handwriting.corpus_text("train")])
    return build_recognizer(charset, block=MAIN_JOB_BLOCKS, dropout=0.0, preset="small-stem",
                            input_height=MAIN_JOB_HEIGHT)


def measure(args) -> dict:
    _harness.set_threads(args.threads)
    from tfnhr.data.synthetic import handwriting
    from tfnhr.data.images import scale_to_height
    from tfnhr.recognition.transcriber import Transcriber, inference_graph

    model = recognizer(args.model)
    lines = [scale_to_height(image, MAIN_JOB_HEIGHT)
             for image, _ in handwriting.generate(args.lines, seed=args.seed, kind="lines", split="val")]
    batches = [images for _, images in
               Transcriber(model, batch_pixels=MAIN_JOB_BATCH_PIXELS).batches(lines)]
    single = batches[0][:1]
    graph = inference_graph(model)
    started = time.perf_counter()
    graph(single)
    trace_s = time.perf_counter() - started
    sides = {"eager": lambda images: model(images, training=False), "graph": graph}
    for images in batches:  # both sides give the same scores
        np.testing.assert_allclose(sides["eager"](images).flat_values.numpy(),
                                   sides["graph"](images).flat_values.numpy(), rtol=1e-4, atol=1e-4)
    steps = {}
    for name, run in sides.items():
        steps[(name, "lines")] = lambda run=run: [run(images) for images in batches]
        steps[(name, "one line")] = lambda run=run: run(single)
    times = _harness.interleaved(steps, rounds=args.rounds, warmup=1)
    report = {"threads": args.threads, "lines": len(lines), "batches": len(batches),
              "pixels_per_line": float(np.mean([line.size for line in lines])), "graph_trace_s": trace_s,
              "model": args.model or "small-stem (untrained)", "parameters": model.count_params()}
    print(f"{len(lines)} validation lines at {MAIN_JOB_HEIGHT} px in {len(batches)} batches of up to "
          f"{MAIN_JOB_BATCH_PIXELS:,} px; {args.threads} thread(s); the graph's trace took {trace_s:.2f} s")
    print(f"{'what':12s} {'eager s':>18s} {'graph s':>18s} {'eager/graph':>12s}")
    for what in ("lines", "one line"):
        eager, graph_times = _harness.spread(times[("eager", what)].wall), _harness.spread(times[("graph", what)].wall)
        ratio = eager["median"] / graph_times["median"]
        report[what] = {"eager": eager, "graph": graph_times, "ratio": ratio}
        print(f"{what:12s} " + " ".join(
            f"{side['median']:8.3f} ({side['min']:.3f}-{side['max']:.3f})" for side in (eager, graph_times))
            + f" {ratio:11.2f}x")
    return report


if __name__ == "__main__":
    parser = _harness.parser(__doc__, rounds=5)
    parser.add_argument("--lines", type=int, default=200, help="validation lines per round (default 200)")
    parser.add_argument("--model", help="a saved .keras recognizer (default: the main job's, untrained)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic lines (default 0)")
    raise SystemExit(_harness.main(measure, parser.parse_args()))
