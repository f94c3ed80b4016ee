"""Where text images come from: a folder in IAM layout (IAM itself or ``tfnhr synth``), a folder
of page images with PAGE-XML/ALTO files (:mod:`tfnhr.data.pages.reading`) or an HDF5 file of
:mod:`tfnhr.data.formats.hdf5`, and converting a folder into HDF5.

All load into the same :class:`~tfnhr.data.samples.TextImageSet`; a path ending in ``.h5`` or
``.hdf5`` is read as HDF5, a folder as pages with kind ``"pages"`` or when it is a pages folder
(:func:`~tfnhr.data.pages.reading.is_pages_folder`), anything else as an IAM folder.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from tfnhr.config.choices import SOURCES
from tfnhr.data.synthetic import iam_writer
from tfnhr.data.formats.hdf5 import TextImageWriter, load_hdf5_set
from tfnhr.data.formats.iam import load_samples
from tfnhr.data.pages.reading import is_pages_folder, load_page_subset, page_examples
from tfnhr.data.samples import Sample, TextImageSet, load_set, read_images

HDF5_SUFFIXES = (".h5", ".hdf5")


def is_hdf5(path: str | Path) -> bool:
    """Whether ``path`` names an HDF5 file (by its suffix)."""
    return Path(path).suffix.lower() in HDF5_SUFFIXES


def load_data_subset(data: str | Path, subset: str, kind: str = "lines", split: str = "official",
                     keep_err: bool = False, height: int | None = None, limit: int | None = None,
                     progress: bool = False) -> TextImageSet:
    """The first ``limit`` (``None``: all) examples of ``subset`` ("train"/"val"/"test") of
    ``data``, images uint8 ``[H, W]`` in memory, scaled to ``height`` rows if given.

    ``data``: an HDF5 file (``.h5``/``.hdf5``; ``kind``, ``split`` and ``keep_err`` were fixed
    when it was converted and are ignored), a pages folder (see :func:`folder_kind`) or a folder
    in IAM layout (unusable samples skipped with counted warnings). Raises ``FileNotFoundError``
    or ``ValueError`` (also for an empty subset).
    """
    if is_hdf5(data):
        return load_hdf5_set(data, subset, height=height, limit=limit, progress=progress)
    if folder_kind(data, kind) == "pages":
        return load_page_subset(data, subset, split, height=height, limit=limit, progress=progress)
    samples = folder_samples(data, subset, kind, split, keep_err)[:limit]
    return load_set(samples, height=height, progress=progress, what=f"{subset} data")


def folder_kind(folder: str | Path, kind: str) -> str:
    """``"pages"`` when ``kind`` is ``"pages"`` or ``folder`` is a pages folder (no ``ascii/``,
    PAGE-XML/ALTO files in it), else ``kind`` (``"lines"``/``"words"`` of IAM layout)."""
    return "pages" if kind == "pages" or is_pages_folder(folder) else kind


def folder_examples(folder: str | Path, subset: str, kind: str, split: str, keep_err: bool,
                    height: int | None, progress: bool) -> Iterator[tuple[str, str, np.ndarray]]:
    """``(id, text, uint8 [H, W] gray scaled to height)`` for each usable example of ``subset`` of
    an IAM-layout or pages folder, one image in memory at a time (skips counted in warnings)."""
    if folder_kind(folder, kind) == "pages":
        yield from page_examples(folder, subset, split, height, progress=progress)
        return
    samples = folder_samples(folder, subset, kind, split, keep_err)
    for sample, gray in read_images(samples, height, progress, what=f"{subset} data"):
        yield sample.id, sample.text, gray


def folder_samples(folder: str | Path, subset: str, kind: str, split: str, keep_err: bool) -> list[Sample]:
    """The samples of ``subset`` of an IAM-layout folder (see :func:`tfnhr.data.formats.iam.load_samples`);
    ``ValueError`` if there are none."""
    samples = load_samples(folder, kind=kind, subset=subset, split=split, keep_err=keep_err)
    if not samples:
        raise ValueError(f"{folder}: the {subset} subset is empty (split {split!r})")
    return samples


def convert_to_hdf5(folder: str | Path, out: str | Path, source: str = "iam",
                    subsets: Sequence[str] = ("train", "val", "test"), kind: str = "lines",
                    split: str = "official", keep_err: bool = False, height: int | None = None,
                    compression: str = "none", progress: bool = False) -> dict:
    """Write ``subsets`` of the IAM-layout or pages ``folder`` to the HDF5 file ``out``, one image
    in memory at a time (scaled to ``height`` rows if given); unusable samples are skipped as
    :func:`load_data_subset` skips them.

    ``source``: one of :data:`~tfnhr.config.choices.SOURCES`, recorded with the options as JSON in the file's
    ``source`` attribute (``synthetic`` requires ``tfnhr synth``'s ``handwriting.json`` in
    ``folder`` and adds its content; a pages folder is recorded as ``"pages"``). Returns ``{"out", "kind", "subsets": {name: {"examples", "pixels"}},
    "pixels", "bytes", "seconds"}``. The file appears only when complete.
    """
    started = time.monotonic()
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if not is_hdf5(out):
        raise ValueError(f"{out}: the output file name must end in {' or '.join(HDF5_SUFFIXES)}")
    kind = folder_kind(folder, kind)
    record = {"from": "pages" if kind == "pages" else source, "folder": str(Path(folder).resolve()),
              "kind": kind, "split": split, "keep_err": keep_err, "height": height}
    if record["from"] == "synthetic":
        marker = Path(folder, iam_writer.MARKER)
        if not marker.is_file():
            raise FileNotFoundError(f"{folder} is not a tfnhr synth folder (no {iam_writer.MARKER}); "
                                    "use --from iam for other folders in IAM layout")
        record["synthetic"] = json.loads(marker.read_text())
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with TextImageWriter(out, json.dumps(record), compression=compression) as writer:
        for subset in subsets:
            for example_id, text, gray in folder_examples(folder, subset, kind, split, keep_err, height, progress):
                writer.add(subset, example_id, text, gray)
        written = writer.close()
    return {"out": str(out), "kind": kind, "subsets": written, "pixels": sum(s["pixels"] for s in written.values()),
            "bytes": Path(out).stat().st_size, "seconds": round(time.monotonic() - started, 2)}
