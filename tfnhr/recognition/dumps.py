"""The outputs of a recognizer's layers for a data set, written to HDF5 (``tfnhr dump``).

Layout (format ``tfnhr-activations``, version 1; the ragged columns of :mod:`tfnhr.data.formats.hdf5`)::

    /                attrs: format, format_version, created, creator, model, data, subset,
                            layers (JSON list of the dumped layer names, in the order asked)
                            seqTags_crc32, labels_crc32 (as for text images)
    /seqTags         utf-8   [N]       sample ids, in the data's order
    /labels          utf-8   [N]       transcriptions
    /layers/<name>/  one group per dumped layer (a name of ``model.layer_names``)
        outputs      float32 [P, C]    every example's output vectors, concatenated; example i's
                                       rows offsets[i]:offsets[i + 1], row-major over its sizes
        seqLengths   int32   [N, r]    its sizes: (H', W') for image layers (r = 2; outputs
                                       [H', W', C]), (T,) for sequence layers (r = 1; [T, C])
        offsets      int64   [N + 1]

One dataset per layer rather than per example keeps the file small and fast to read with
thousands of examples; :func:`load_activations` gives the per-example arrays back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfnhr.config.choices import DEFAULT_BATCH_PIXELS
from tfnhr.data.dataset import IMAGES_SPEC
from tfnhr.data.formats.hdf5 import (AtomicHdf5File, RaggedColumn, StringColumn, open_hdf5, read_index, read_rows,
                                     read_strings, reading)
from tfnhr.data.samples import TextImageSet
from tfnhr.recognition.transcriber import Transcriber
from tfnhr.models.ctc_model import CtcModel
from tfnhr.runtime.progress import Progress

ACTIVATIONS_FORMAT = "tfnhr-activations"


def dump_activations(model: CtcModel, data: TextImageSet, layers: Sequence[str], out: str | Path,
                     batch_pixels: int = DEFAULT_BATCH_PIXELS, progress: bool = False,
                     attrs: dict[str, str] | None = None) -> dict[str, dict[str, int]]:
    """Write the outputs of ``layers`` for every image of ``data`` (as the model reads it,
    :meth:`Transcriber.prepare <tfnhr.recognition.transcriber.Transcriber.prepare>`, scaled to its
    ``input_height``; run in batches of at most ``batch_pixels`` pixels) to ``out``; ``attrs``
    are added to the root attributes. Returns ``{layer: {"values": P, "channels": C}}``.

    Unknown layer names raise ``ValueError`` (listing the model's) and write nothing.
    """
    # One graph for every batch shape: tracing costs seconds once, then batches run ~3x faster than
    # eagerly. Without autograph, errors such as unknown layer names come through unchanged.
    run = tf.function(lambda images: model.layer_outputs(images, layers, training=False),
                      input_signature=[IMAGES_SPEC], autograph=False)
    bar = Progress(len(data), "dump", enabled=progress)
    with AtomicHdf5File(out, ACTIVATIONS_FORMAT, {**(attrs or {}), "layers": json.dumps(list(layers))}) as output:
        tags, labels = StringColumn(output.file, "seqTags"), StringColumn(output.file, "labels")
        columns: dict[str, RaggedColumn] = {}
        transcriber = Transcriber(model, batch_pixels=batch_pixels)
        for batch, images in transcriber.batches([transcriber.prepare(gray) for gray in data.images]):
            for name, outputs in run(images).items():
                if name not in columns:
                    columns[name] = RaggedColumn(output.file.require_group("layers").create_group(name), "outputs",
                                                 np.float32, outputs.ragged_rank, (outputs.flat_values.shape[-1],))
                for example in _per_example(outputs):
                    columns[name].append(example)
            for index in batch:
                tags.append(data.ids[index])
                labels.append(data.texts[index])
            bar.step(len(batch))
        for column in (tags, labels, *columns.values()):
            column.flush()
        output.commit()
    return {name: {"values": column.rows, "channels": column.channels[0]} for name, column in columns.items()}


def _per_example(outputs: tf.RaggedTensor) -> list[np.ndarray]:
    """Ragged ``[B, (H'), (W'), C]`` or ``[B, (T), C]`` -> ``B`` arrays ``[H'_i, W'_i, C]`` or
    ``[T_i, C]`` (views of one copy of the flat values)."""
    flat = outputs.flat_values.numpy()
    lengths = [row_lengths.numpy() for row_lengths in outputs.nested_row_lengths()]
    if len(lengths) == 1:
        return np.split(flat, np.cumsum(lengths[0])[:-1])
    heights, widths = lengths
    first_rows = np.concatenate([[0], np.cumsum(heights)[:-1]])
    sizes = heights * widths[first_rows]
    return [values.reshape(height, -1, flat.shape[-1])
            for values, height in zip(np.split(flat, np.cumsum(sizes)[:-1]), heights)]


def load_activations(path: str | Path, layer: str) -> tuple[list[str], list[str], list[np.ndarray]]:
    """``(ids, texts, outputs)`` of ``layer`` in a dump: ``outputs[i]`` float32 ``[H', W', C]``
    or ``[T, C]``. :class:`~tfnhr.data.formats.hdf5.Hdf5FormatError` for a damaged file, ``ValueError``
    for a layer it does not hold."""
    with open_hdf5(path, ACTIVATIONS_FORMAT) as file, reading(path, f"/layers/{layer}"):
        dumped = json.loads(file.attrs["layers"])
        if layer not in dumped:
            raise ValueError(f"{path} holds no {layer!r} outputs (it has {dumped})")
        group = file["layers"][layer]
        offsets = read_index(path, group, "outputs", rank=group["seqLengths"].shape[-1])
        count = len(offsets) - 1
        ids, texts = read_strings(path, file, "seqTags", count), read_strings(path, file, "labels", count)
        sizes, values = group["seqLengths"][()], read_rows(path, group["outputs"], offsets, count)
    return ids, texts, [values[start:stop].reshape(*size, -1)
                        for start, stop, size in zip(offsets, offsets[1:], sizes)]
