"""Loading a data set from one HDF5 file vs from its IAM image folder, and one training epoch of
batches from each.

The script writes a synthetic set (``tfnhr synth --train N``, via
:func:`tfnhr.data.synthetic.iam_writer.write_iam_layout`) into a temporary folder, converts it with
:func:`tfnhr.data.sources.convert_to_hdf5` uncompressed and with gzip, and times, interleaved over
``--rounds`` rounds:

1. **load**: :func:`tfnhr.data.sources.load_data_subset` of the train subset from the folder
   (one PNG decode per image) and from each file (one read, sliced); the three results are
   checked to be equal (ids, texts, pixels);
2. **epoch**: iterating one epoch of :func:`tfnhr.data.dataset.make_dataset` batches (shuffled,
   ``--batch-pixels``) of the folder's and of the file's set: both are the same in-memory
   images, so this shows that where the images came from does not change the input pipeline.

All files were just written, so they are read from the page cache (warm), as on a machine that
loads the same set every run; a cold read adds the disk's time for the bytes (sizes reported).

Usage::

    python benchmarks/hdf5_vs_folder.py [--train 2000] [--height H] [--rounds 3] [--threads 1] [--out res.json]

Without ``--out`` the JSON goes to stdout after the table (the table then goes to stderr).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import _harness


def folder_bytes(folder: Path) -> int:
    """Bytes of all files under ``folder``."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def iterate_epoch(data, charset, batch_pixels: int) -> int:
    """Pull one shuffled epoch of ``make_dataset`` batches; returns the batch count."""
    from tfnhr.data.dataset import make_dataset

    return sum(1 for _ in make_dataset(data, charset, batch_pixels, shuffle=True))


def same_sets(a, b) -> bool:
    return a.ids == b.ids and a.texts == b.texts and all(
        x.shape == y.shape and (x == y).all() for x, y in zip(a.images, b.images))


def measure(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="hdf5_vs_folder_") as root:
        report = measure_in(args, Path(root))
    print_table(report)
    return report


def measure_in(args: argparse.Namespace, root: Path) -> dict:
    _harness.set_threads(args.threads)
    from tfnhr.charset import Charset
    from tfnhr.data.synthetic import iam_writer
    from tfnhr.data.sources import convert_to_hdf5, load_data_subset

    folder = root / "synth"
    written, synth_seconds, _ = _harness.timed(iam_writer.write_iam_layout, folder,
                                               {"train": args.train, "val": 0, "test": 0}, seed=args.seed,
                                               progress=False)
    files, convert_seconds = {}, {}
    for compression in ("none", "gzip"):
        summary = convert_to_hdf5(folder, root / f"{compression}.h5", "synthetic", subsets=["train"],
                                  compression=compression)
        files[compression], convert_seconds[compression] = root / f"{compression}.h5", summary["seconds"]
    sources = {"folder": folder, "h5": files["none"], "h5_gzip": files["gzip"]}

    load_seconds = {name: [] for name in sources}
    epoch_seconds = {"folder": [], "h5": []}
    loaded = {}
    for _ in range(args.rounds):
        for name, path in sources.items():
            loaded[name], seconds, _ = _harness.timed(load_data_subset, path, "train", height=args.height)
            load_seconds[name].append(seconds)
        if not all(same_sets(loaded["folder"], data) for data in loaded.values()):
            raise SystemExit("the folder and the HDF5 files loaded different sets")
        charset = Charset.from_texts(loaded["folder"].texts)
        for name in epoch_seconds:
            batches, seconds, _ = _harness.timed(iterate_epoch, loaded[name], charset, args.batch_pixels)
            epoch_seconds[name].append(seconds)

    load = {name: _harness.spread(times, keep_all=True) for name, times in load_seconds.items()}
    best = {name: figures["min"] for name, figures in load.items()}
    data = loaded["folder"]
    return {
        "examples": len(data), "pixels": int(data.pixels().sum()), "height": args.height,
        "threads": args.threads, "rounds": args.rounds, "batch_pixels": args.batch_pixels,
        "synth_seconds": round(synth_seconds, 2), "synth_images": written["images"],
        "bytes": {"folder": folder_bytes(folder), **{f"h5_{c}": path.stat().st_size for c, path in files.items()}},
        "convert_seconds": convert_seconds,
        "load_seconds": load,
        "load_speedup": {"h5": best["folder"] / best["h5"], "h5_gzip": best["folder"] / best["h5_gzip"]},
        "epoch_seconds": {name: _harness.spread(times, keep_all=True) for name, times in epoch_seconds.items()},
        "epoch_batches": batches,
        "epoch_ratio": min(epoch_seconds["folder"]) / min(epoch_seconds["h5"]),
    }


def print_table(report: dict) -> None:
    sizes = report["bytes"]
    print(f"{report['examples']} synthetic lines, {report['pixels'] / 1e6:.1f} M pixels, height "
          f"{report['height'] or 'as rendered'}, {report['threads']} thread(s), best of {report['rounds']}")
    print(f"{'source':<10} {'MB on disk':>10} {'load s':>8} {'speed-up':>8} {'epoch s':>8}")
    for name, size_key in (("folder", "folder"), ("h5", "h5_none"), ("h5_gzip", "h5_gzip")):
        load = report["load_seconds"][name]["min"]
        speedup = report["load_speedup"].get(name, 1.0)
        epoch = report["epoch_seconds"].get(name, {}).get("min")
        print(f"{name:<10} {sizes[size_key] / 1e6:10.1f} {load:8.3f} {speedup:7.1f}x "
              f"{'' if epoch is None else f'{epoch:8.2f}'}")
    print(f"conversion: {report['convert_seconds']['none']:.1f} s (none), {report['convert_seconds']['gzip']:.1f} s "
          f"(gzip); epoch folder / h5 = {report['epoch_ratio']:.2f} ({report['epoch_batches']} batches)")


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, rounds=3)
    parser.add_argument("--train", type=int, default=2000, help="synthetic training lines")
    parser.add_argument("--height", type=int, default=None, help="scale images to this height when loading")
    parser.add_argument("--batch-pixels", type=int, default=200_000, help="pixel budget of one batch (epoch)")
    parser.add_argument("--seed", type=int, default=0, help="synthetic set seed")
    return _harness.main(measure, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
