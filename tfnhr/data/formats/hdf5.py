"""HDF5 files of variable-size arrays with ids and texts (RETURNN-like), written as a stream and
read in one piece.

Text images (format ``tfnhr-text-images``, version 1; :class:`TextImageWriter`,
:func:`load_hdf5_set`)::

    /                    attrs: format = "tfnhr-text-images", format_version = 1 (both required),
                                source (what was converted, how; JSON from tfnhr convert),
                                created (UTC, ISO 8601), creator (tfnhr, h5py and HDF5 versions)
    /train, /val, /test  one group per subset (any of them)
        inputs      uint8  [P]      every image's gray levels (0 = ink, 255 = paper), row-major,
                                    concatenated; P = sum of H_i * W_i
        seqLengths  int32  [N, 2]   (H_i, W_i) of example i, pixels
        offsets     int64  [N + 1]  where example i starts in inputs: 0, ..., P (optional for
                                    readers: the cumulative sum of H_i * W_i)
        seqTags     utf-8  [N]      sample ids (e.g. a01-000u-00)
        labels      utf-8  [N]      transcriptions
        attrs seqTags_crc32, labels_crc32 (optional): CRC-32 (zlib) of the strings' UTF-8 bytes,
              each followed by one zero byte, in order

Ragged arrays in general (:class:`RaggedColumn`): ``values [P, *channels]`` holds example i's
``[*sizes_i, *channels]`` array flattened over its sizes, ``seqLengths [N, rank]`` its sizes and
``offsets [N + 1]`` its first row; :mod:`tfnhr.recognition.dumps` stores layer outputs this way.

Integrity: the numeric datasets are chunked (256 KiB) with a Fletcher-32 checksum per chunk
(optionally gzip-compressed), the file structure uses HDF5 1.10 metadata (checksummed), and the
variable-length strings, which HDF5 cannot checksum, carry the CRC-32 attributes above. Writers
fill a temporary file next to the target and rename it at the end, so a file under the final
name is complete. Readers check every size and offset and turn any failure into
:class:`Hdf5FormatError` naming the file and where (dataset, example, byte offset): a damaged
file never loads partly.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np

import tfnhr
from tfnhr.data.images import scale_to_height
from tfnhr.data.samples import TextImageSet
from tfnhr.runtime.progress import Progress

IMAGES_FORMAT = "tfnhr-text-images"
FORMAT_VERSION = 1
LIBVER = ("v110", "v110")
"""HDF5 file-format bounds: 1.10 structures (checksummed metadata), readable by HDF5 >= 1.10."""
CHUNK_BYTES = 1 << 18
"""Target size of one chunk of a values dataset (HDF5 allocates the last one in full)."""
INDEX_CHUNK = 4096
"""Rows per chunk of the per-example datasets (sizes, offsets, strings)."""
_H5_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError)
"""What h5py raises for damaged files (ValueError includes UnicodeDecodeError)."""


class Hdf5FormatError(ValueError):
    """An HDF5 file is truncated, damaged or not in the expected layout; the message names the
    file and where it failed (dataset, example index, byte offset)."""


class AtomicHdf5File:
    """An HDF5 file written under a temporary name next to ``path`` and renamed to ``path`` by
    :meth:`commit`. Root attributes: ``format``, ``format_version``, ``created``, ``creator`` and
    ``attrs``. As a context manager: leaving the block by an exception or without :meth:`commit`
    deletes the temporary file."""

    def __init__(self, path: str | Path, format_name: str, attrs: dict[str, str | int]) -> None:
        self.path = Path(path)
        self.temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
        self.file = h5py.File(self.temp, "w", libver=LIBVER)
        self.file.attrs.update({
            "format": format_name, "format_version": FORMAT_VERSION,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "creator": f"tfnhr {tfnhr.__version__} (h5py {h5py.__version__}, HDF5 {h5py.version.hdf5_version})",
            **attrs})

    def commit(self) -> None:
        """Close the file and rename it to ``path``."""
        self.file.close()
        os.replace(self.temp, self.path)

    def abandon(self) -> None:
        """Close and delete the temporary file, unless committed."""
        if self.temp.exists():
            self.file.close()
            self.temp.unlink()

    def __enter__(self) -> AtomicHdf5File:
        return self

    def __exit__(self, error_type, error, traceback) -> None:
        self.abandon()


class RaggedColumn:
    """Appends arrays ``[*sizes, *channels]`` (``rank`` sizes each) to ``group``: ``values_name``
    ``[P, *channels]``, ``seqLengths`` int32 ``[N, rank]``, ``offsets`` int64 ``[N + 1]``.

    Arrays are buffered and written about ``CHUNK_BYTES`` at a time, so memory stays bounded.
    """

    def __init__(self, group: h5py.Group, values_name: str, dtype: np.dtype | str, rank: int,
                 channels: tuple[int, ...] = (), compression: str = "none") -> None:
        self.dtype, self.rank, self.channels = np.dtype(dtype), rank, tuple(channels)
        row_bytes = self.dtype.itemsize * int(np.prod(self.channels, dtype=np.int64))
        self.chunk_rows = max(1, CHUNK_BYTES // row_bytes)
        self.values = _appendable(group, values_name, self.dtype, self.channels, self.chunk_rows,
                                  compression)
        self.lengths = _appendable(group, "seqLengths", np.int32, (rank,), INDEX_CHUNK, compression)
        self.offsets = _appendable(group, "offsets", np.int64, (), INDEX_CHUNK, compression)
        _append(self.offsets, np.zeros(1, np.int64))
        self.rows = 0
        self._pending: list[np.ndarray] = []
        self._pending_sizes: list[tuple[int, ...]] = []
        self._pending_rows = 0

    def append(self, array: np.ndarray) -> None:
        """Add one example, ``[*sizes, *channels]`` with every size positive."""
        sizes = array.shape[:self.rank]
        if (array.ndim != self.rank + len(self.channels) or array.shape[self.rank:] != self.channels
                or min(sizes, default=0) < 1):
            raise ValueError(f"expected an array [{self.rank} positive sizes, *{self.channels}], "
                             f"got {array.shape}")
        self._pending.append(np.asarray(array, self.dtype).reshape(-1, *self.channels))
        self._pending_sizes.append(sizes)
        self._pending_rows += len(self._pending[-1])
        if self._pending_rows >= self.chunk_rows:
            self.flush()

    def flush(self) -> None:
        """Write the buffered examples."""
        if not self._pending:
            return
        rows = np.array([len(values) for values in self._pending], np.int64)
        _append(self.values, np.concatenate(self._pending))
        _append(self.lengths, np.array(self._pending_sizes, np.int32))
        _append(self.offsets, self.rows + np.cumsum(rows))
        self.rows += int(rows.sum())
        self._pending, self._pending_sizes, self._pending_rows = [], [], 0


class StringColumn:
    """Appends UTF-8 strings to ``group[name]`` ``[N]`` and records their CRC-32 in the group
    attribute ``<name>_crc32`` on :meth:`flush`."""

    def __init__(self, group: h5py.Group, name: str) -> None:
        self.group, self.name = group, name
        self.dataset = _appendable(group, name, h5py.string_dtype("utf-8"), (), INDEX_CHUNK, "none")
        self.crc = 0
        self._pending: list[str] = []

    def append(self, text: str) -> None:
        self._pending.append(text)
        self.crc = zlib.crc32(text.encode("utf-8") + b"\0", self.crc)
        if len(self._pending) >= INDEX_CHUNK:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            _append(self.dataset, np.array(self._pending, dtype=object))
            self._pending = []
        self.group.attrs[f"{self.name}_crc32"] = self.crc


def _appendable(group: h5py.Group, name: str, dtype, row_shape: tuple[int, ...], chunk_rows: int,
                compression: str) -> h5py.Dataset:
    """An empty resizable dataset ``[0, *row_shape]``; numeric ones checksummed per chunk."""
    numeric = np.dtype(dtype).kind in "biuf"
    return group.create_dataset(
        name, shape=(0, *row_shape), maxshape=(None, *row_shape), dtype=dtype, chunks=(chunk_rows, *row_shape),
        fletcher32=numeric, compression=compression if numeric and compression != "none" else None)


def _append(dataset: h5py.Dataset, rows: np.ndarray) -> None:
    start = dataset.shape[0]
    dataset.resize(start + len(rows), axis=0)
    dataset[start:] = rows


class TextImageWriter:
    """Writes gray text images with ids and transcriptions to ``path`` in the text-image layout
    (module docstring), example by example. A context manager: leaving it by an exception or
    without :meth:`close` deletes the temporary file.

    ``source``: what the data is (stored as the root attribute ``source``); ``compression``:
    ``"none"`` (fastest to read) or an HDF5 filter for the pixels and sizes (``"gzip"``: deflate
    level 4, smaller files, several times slower to read).
    """

    def __init__(self, path: str | Path, source: str, compression: str = "none") -> None:
        self.output = AtomicHdf5File(path, IMAGES_FORMAT, {"source": source})
        self.compression = compression
        self.subsets: dict[str, tuple[RaggedColumn, StringColumn, StringColumn]] = {}

    def add(self, subset: str, sample_id: str, text: str, gray: np.ndarray) -> None:
        """Append one example, uint8 ``[H, W]`` gray, to ``subset`` (its group is made on first use)."""
        if gray.dtype != np.uint8 or gray.ndim != 2:
            raise ValueError(f"{sample_id}: expected a uint8 [H, W] gray image, got {gray.dtype} {gray.shape}")
        if subset not in self.subsets:
            group = self.output.file.create_group(subset)
            self.subsets[subset] = (RaggedColumn(group, "inputs", np.uint8, 2, compression=self.compression),
                                    StringColumn(group, "seqTags"), StringColumn(group, "labels"))
        images, tags, labels = self.subsets[subset]
        images.append(gray)
        tags.append(sample_id)
        labels.append(text)

    def close(self) -> dict[str, dict[str, int]]:
        """Write what is buffered and rename the file into place; returns
        ``{subset: {"examples": N, "pixels": P}}``."""
        summary = {}
        for subset, columns in self.subsets.items():
            for column in columns:
                column.flush()
            summary[subset] = {"examples": len(columns[0].lengths), "pixels": columns[0].rows}
        self.output.commit()
        return summary

    def __enter__(self) -> TextImageWriter:
        return self

    def __exit__(self, error_type, error, traceback) -> None:
        self.output.abandon()


@contextlib.contextmanager
def reading(path: str | Path, what: str) -> Iterator[None]:
    """Turn h5py's errors inside the block into :class:`Hdf5FormatError` ``"<path>: <what>: ..."``."""
    try:
        yield
    except Hdf5FormatError:
        raise
    except _H5_ERRORS as error:
        raise Hdf5FormatError(f"{path}: {what}: {type(error).__name__}: {error}") from error


def open_hdf5(path: str | Path, format_name: str) -> h5py.File:
    """``path`` opened for reading after checking its ``format`` attribute; ``FileNotFoundError``
    if it does not exist, :class:`Hdf5FormatError` if it is no readable file of that format."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such HDF5 file")
    try:
        file = h5py.File(path, "r")
    except _H5_ERRORS as error:
        raise Hdf5FormatError(f"{path}: not a readable HDF5 file (truncated or damaged? "
                              f"{path.stat().st_size} bytes): {error}") from error
    try:
        with reading(path, "root attributes"):
            name, version = file.attrs.get("format"), file.attrs.get("format_version")
        if name != format_name or not isinstance(version, (int, np.integer)) or not 1 <= version <= FORMAT_VERSION:
            raise Hdf5FormatError(f"{path}: not a {format_name} file of version <= {FORMAT_VERSION} "
                                  f"(format attribute {name!r}, version {version!r})")
    except Hdf5FormatError:
        file.close()
        raise
    return file


def read_index(path: str | Path, group: h5py.Group, values_name: str, rank: int) -> np.ndarray:
    """The checked row offsets, int64 ``[N + 1]``, of the ragged column ``values_name`` in
    ``group`` (see :class:`RaggedColumn`): every size positive, the offsets (stored or derived)
    the cumulative sizes, ending at the number of value rows."""
    name = group.name
    for dataset in (values_name, "seqLengths"):
        if dataset not in group:
            raise Hdf5FormatError(f"{path}: {name} has no {dataset} dataset")
    with reading(path, f"{name}/seqLengths"):
        lengths = group["seqLengths"][()]
    if lengths.ndim != 2 or lengths.shape[1] != rank or lengths.dtype.kind not in "iu":
        raise Hdf5FormatError(f"{path}: {name}/seqLengths should be integers [N, {rank}], got "
                              f"{lengths.dtype} {list(lengths.shape)}")
    bad = np.flatnonzero((lengths < 1).any(axis=1))
    if len(bad):
        raise Hdf5FormatError(f"{path}: {name}/seqLengths: example {bad[0]} has size {lengths[bad[0]].tolist()} "
                              f"({len(bad)} of {len(lengths)} examples have a size < 1)")
    offsets = np.concatenate([[0], np.cumsum(np.prod(lengths.astype(np.int64), axis=1))])
    if "offsets" in group:
        with reading(path, f"{name}/offsets"):
            stored = group["offsets"][()]
        if stored.shape != offsets.shape:
            raise Hdf5FormatError(f"{path}: {name}/offsets has {len(stored)} entries for {len(lengths)} examples "
                                  f"(expected {len(offsets)})")
        wrong = np.flatnonzero(stored != offsets)
        if len(wrong):
            raise Hdf5FormatError(f"{path}: {name}/offsets[{wrong[0]}] = {stored[wrong[0]]}, but the sizes of "
                                  f"the examples before it sum to {offsets[wrong[0]]}")
    with reading(path, f"{name}/{values_name}"):
        rows = group[values_name].shape[0] if group[values_name].ndim else -1
    if rows != offsets[-1]:
        raise Hdf5FormatError(f"{path}: {name}/{values_name} has {rows} rows, but the {len(lengths)} examples' "
                              f"sizes in seqLengths sum to {offsets[-1]}")
    return offsets


def read_strings(path: str | Path, group: h5py.Group, name: str, count: int) -> list[str]:
    """``group[name]``, ``count`` UTF-8 strings, checked against ``<name>_crc32`` if present."""
    where = f"{group.name.rstrip('/')}/{name}"
    if name not in group:
        raise Hdf5FormatError(f"{path}: no {where} dataset")
    with reading(path, where):
        strings = group[name].asstr()[()].tolist() if group[name].ndim == 1 else None
    if strings is None or len(strings) != count:
        raise Hdf5FormatError(f"{path}: {where} should hold {count} strings (one per example), "
                              f"got shape {group[name].shape}")
    expected = group.attrs.get(f"{name}_crc32")
    if expected is not None:
        crc = 0
        for text in strings:
            crc = zlib.crc32(text.encode("utf-8") + b"\0", crc)
        if crc != expected:
            raise Hdf5FormatError(f"{path}: {where}: the strings' CRC-32 is {crc:#010x}, the file "
                                  f"recorded {int(expected):#010x} (damaged)")
    return strings


def read_rows(path: str | Path, dataset: h5py.Dataset, offsets: np.ndarray, count: int) -> np.ndarray:
    """Rows ``offsets[0]:offsets[count]`` of ``dataset`` in one read. On a read error the chunks
    are read one by one to name the first bad one: its rows, examples and byte offset in the file."""
    stop = int(offsets[count])
    try:
        return dataset[:stop]
    except _H5_ERRORS as error:
        where = _locate_bad_chunk(dataset, offsets, stop) or error
        raise Hdf5FormatError(f"{path}: {dataset.name}: {where}") from error


def _locate_bad_chunk(dataset: h5py.Dataset, offsets: np.ndarray, stop: int) -> str | None:
    rows = dataset.chunks[0]
    for start in range(0, stop, rows):
        try:
            dataset[start:min(start + rows, stop)]
        except _H5_ERRORS as error:
            first, last = np.searchsorted(offsets, [start, min(start + rows, stop) - 1], side="right") - 1
            where = dataset.id.get_chunk_info_by_coord((start,) + (0,) * (dataset.ndim - 1))
            return (f"chunk of rows {start}..{min(start + rows, stop) - 1} (examples {first}..{last}) at byte "
                    f"offset {where.byte_offset} of the file ({where.size} bytes) is unreadable: {error}")
    return None


def load_hdf5_set(path: str | Path, subset: str, height: int | None = None, limit: int | None = None,
                  progress: bool = False) -> TextImageSet:
    """The first ``limit`` (``None``: all) examples of ``subset`` of a text-image file, images
    uint8 ``[H, W]`` (scaled to ``height`` rows, aspect kept, if given).

    The pixels are read in one piece and sliced. Raises ``FileNotFoundError`` (no file),
    ``ValueError`` (no such subset, or it is empty) or :class:`Hdf5FormatError` (damaged file).
    """
    with open_hdf5(path, IMAGES_FORMAT) as file, reading(path, f"/{subset}"):
        subsets = sorted(file)
        if subset not in subsets:
            raise ValueError(f"{path} has no {subset} subset (it has: {', '.join(subsets) or 'none'})")
        group = file[subset]
        offsets = read_index(path, group, "inputs", rank=2)
        count = len(offsets) - 1 if limit is None else min(limit, len(offsets) - 1)
        ids = read_strings(path, group, "seqTags", len(offsets) - 1)[:count]
        texts = read_strings(path, group, "labels", len(offsets) - 1)[:count]
        sizes = group["seqLengths"][:count]
        if count == 0:
            raise ValueError(f"{path}: the {subset} subset is empty")
        inputs = group["inputs"]
        if inputs.dtype != np.uint8 or inputs.ndim != 1:
            raise Hdf5FormatError(f"{path}: {inputs.name} should be uint8 [P], "
                                  f"got {inputs.dtype} {list(inputs.shape)}")
        pixels = read_rows(path, inputs, offsets, count)
    bar = Progress(count, f"reading {subset} data", enabled=progress)
    images = []
    for index, (start, (rows, columns)) in enumerate(zip(offsets, sizes), start=1):
        images.append(scale_to_height(pixels[start:start + rows * columns].reshape(rows, columns), height))
        bar.update(index)
    return TextImageSet(images, texts, ids)

