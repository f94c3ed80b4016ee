"""Reading an IAM Handwriting Database folder (lines or words) into :class:`Sample` records.

IAM needs registration, so users download it themselves and pass its root folder. Expected layout
(the synthetic generator writes the same one, with ids like ``s00-0000-00``)::

    ascii/lines.txt    ascii/words.txt
    lines/a01/a01-000u/a01-000u-00.png
    words/a01/a01-000u/a01-000u-00-00.png
    largeWriterIndependentTextLineRecognitionTask/{trainset,validationset1,validationset2,testset}.txt

Transcription rows (``#`` starts a comment line; ``|`` in a transcription is a space)::

    lines.txt: id ok|err graylevel components x y w h transcription
    words.txt: id ok|err graylevel x y w h tag transcription

Split files list sample ids one per line. An entry selects every sample whose id equals it or
starts with it followed by ``-``: a form id (``a01-000u``) selects the form's lines and words, a
line id selects the line and its words.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path

from tfnhr.config.choices import KINDS, SUBSETS
from tfnhr.data.samples import Sample

IAM_HOMEPAGE = "https://fki.tic.heia-fr.ch/databases/iam-handwriting-database"
OFFICIAL_SPLIT_DIR = "largeWriterIndependentTextLineRecognitionTask"
OFFICIAL_SPLIT_FILES = {"train": "trainset.txt", "val": "validationset1.txt", "test": "testset.txt"}
OFFICIAL_VALIDATION2 = "validationset2.txt"
SPLIT_FOLDER_NAMES = {"train": ("train",), "val": ("valid", "validation", "val", "cv"),
                      "test": ("test",)}
"""Accepted file names (without suffix) per subset in a user-supplied split folder."""
SPLIT_FOLDER_SUFFIXES = ("", ".txt", ".lst")

_ID_PARTS = {"lines": 3, "words": 4}  # a01-000u-00, a01-000u-00-00
_TEXT_FIELD = 8  # transcription starts at this 0-based field in both files


@dataclasses.dataclass(frozen=True)
class IamRecord:
    """One row of ``ascii/lines.txt`` or ``ascii/words.txt``.

    ``ok``: IAM's segmentation result was ``ok`` (``False`` for ``err``); ``graylevel``: the
    binarisation threshold (0..255); ``box``: ``(x, y, w, h)`` in pixels of the form image (IAM
    writes -1s for some words); ``text``: the transcription (the 9th and later whitespace-separated
    fields joined by single spaces) with ``|`` turned into spaces;
    ``tag``: the grammatical tag (words only, ``None`` for lines).
    """

    id: str
    ok: bool
    graylevel: int
    box: tuple[int, int, int, int]
    text: str
    tag: str | None = None


class SkippedSamplesWarning(UserWarning):
    """Rows whose image file is missing or empty were left out (the message counts them)."""


@dataclasses.dataclass(frozen=True)
class LoadSummary:
    """What :func:`load_samples_with_summary` read and left out.

    ``rows``: data rows in the transcription file; ``err_rows``: of those, marked ``err``
    (kept only when ``err_kept``); ``outside_subset``: kept rows not in the requested subset
    (0 when no subset); ``candidates``: rows left to load; ``missing`` / ``empty``: image paths
    of candidates whose file does not exist / has zero bytes (skipped); ``err_dropped``: rows of
    the subset left out because they are marked ``err``; ``loaded``: samples returned.
    """

    kind: str
    rows: int
    err_rows: int
    err_kept: bool
    outside_subset: int
    candidates: int
    missing: tuple[str, ...]
    empty: tuple[str, ...]
    err_dropped: int = 0

    @property
    def loaded(self) -> int:
        return self.candidates - len(self.missing) - len(self.empty)

    def skipped_message(self) -> str:
        """e.g. ``skipped 4 of 121 lines: 1 row marked err (--keep-err keeps such rows), 2
        missing images (first: …), 1 empty file (first: …)``."""
        parts = [f"{_plural(self.err_dropped, 'row')} marked err (--keep-err keeps such rows)"] if self.err_dropped else []
        parts += [f"{_plural(len(paths), what)} (first: {paths[0]})"
                  for paths, what in ((self.missing, "missing image"), (self.empty, "empty file"))
                  if paths]
        skipped = len(self.missing) + len(self.empty) + self.err_dropped
        return f"skipped {skipped} of {self.candidates + self.err_dropped} {self.kind}: {', '.join(parts)}"


def parse_transcriptions(path: str | Path, kind: str) -> list[IamRecord]:
    """The records of an IAM transcription file, in file order.

    ``kind``: ``"lines"`` (``lines.txt`` layout) or ``"words"`` (``words.txt`` layout). Blank and
    ``#`` lines are skipped; a malformed row raises ``ValueError`` naming the file and line number.
    """
    _check_kind(kind)
    records = []
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if line.strip() and not line.startswith("#"):
                try:
                    records.append(_parse_row(line.split(), kind))
                except ValueError as error:
                    raise ValueError(f"{path}:{number}: malformed {kind} row ({error}): "
                                     f"{line.rstrip()!r}") from None
    return records


def _parse_row(fields: list[str], kind: str) -> IamRecord:
    if len(fields) <= _TEXT_FIELD:
        raise ValueError(f"expected at least {_TEXT_FIELD + 1} fields, got {len(fields)}")
    sample_id, result = fields[0], fields[1]
    if len(sample_id.split("-")) != _ID_PARTS[kind] or "" in sample_id.split("-"):
        raise ValueError(f"id {sample_id!r} should have {_ID_PARTS[kind]} '-'-separated parts")
    if result not in ("ok", "err"):
        raise ValueError(f"segmentation result must be 'ok' or 'err', got {result!r}")
    # lines: graylevel components x y w h; words: graylevel x y w h (then the tag)
    numbers = fields[2:8] if kind == "lines" else fields[2:7]
    try:
        graylevel, *rest = (int(value) for value in numbers)
    except ValueError:
        raise ValueError(f"expected integers in {numbers}") from None
    box = tuple(rest[-4:])
    text = " ".join(fields[_TEXT_FIELD:]).replace("|", " ")
    tag = fields[7] if kind == "words" else None
    return IamRecord(sample_id, result == "ok", graylevel, box, text, tag)


def image_path(root: str | Path, kind: str, sample_id: str) -> Path:
    """``root/<kind>/a01/a01-000u/<sample_id>.png`` (folders: the id up to its first and second
    ``-``)."""
    _check_kind(kind)
    parts = sample_id.split("-")
    if len(parts) < 3:
        raise ValueError(f"IAM {kind} id {sample_id!r} needs at least 3 '-'-separated parts")
    return Path(root, kind, parts[0], f"{parts[0]}-{parts[1]}", f"{sample_id}.png")


def read_split_ids(root: str | Path, split: str | Path = "official",
                   include_validation2: bool = False) -> dict[str, set[str]]:
    """Ids listed per subset: ``{"train": ..., "val": ..., "test": ...}`` (line or form ids).

    ``split``: ``"official"`` reads ``root/largeWriterIndependentTextLineRecognitionTask/``
    (``val`` = ``validationset1.txt``, plus ``validationset2.txt`` when ``include_validation2``);
    any other value is a folder holding one file per subset named ``train``,
    ``valid``/``validation``/``val``/``cv`` and ``test``, each with suffix ``.txt``, ``.lst`` or
    none (e.g. the 6161/966/2915-line split). Missing files raise ``FileNotFoundError`` naming
    what was looked for; an id listed in two subsets raises ``ValueError``.
    """
    if str(split) == "official":
        folder = Path(root, OFFICIAL_SPLIT_DIR)
        files = {subset: [folder / name] for subset, name in OFFICIAL_SPLIT_FILES.items()}
        if include_validation2:
            files["val"].append(folder / OFFICIAL_VALIDATION2)
        for path in (path for paths in files.values() for path in paths):
            if not path.is_file():
                raise FileNotFoundError(
                    f"official IAM split file {path} not found: unpack IAM's "
                    f"{OFFICIAL_SPLIT_DIR}.zip into {root} (or pass split=<folder of split files>)")
    else:
        files = {subset: [_find_split_file(Path(split), subset)] for subset in SUBSETS}
    ids = {subset: set().union(*(_read_id_list(path) for path in paths))
           for subset, paths in files.items()}
    for index, first in enumerate(SUBSETS):
        for second in SUBSETS[index + 1:]:
            shared = ids[first] & ids[second]
            if shared:
                raise ValueError(f"split {split}: {len(shared)} ids are in both {first} and "
                                 f"{second}, e.g. {sorted(shared)[0]!r}")
    return ids


def _find_split_file(folder: Path, subset: str) -> Path:
    if not folder.is_dir():
        raise FileNotFoundError(f"split folder {folder} not found (split is 'official' or a "
                                "folder with train, valid and test id lists)")
    names = [stem + suffix for stem in SPLIT_FOLDER_NAMES[subset]
             for suffix in SPLIT_FOLDER_SUFFIXES]
    found = [folder / name for name in names if (folder / name).is_file()]
    if not found:
        raise FileNotFoundError(f"no {subset} split file in {folder}: looked for "
                                f"{', '.join(names)}")
    if len(found) > 1:
        raise ValueError(f"several {subset} split files in {folder}: "
                         f"{', '.join(path.name for path in found)}; keep one")
    return found[0]


def _read_id_list(path: Path) -> set[str]:
    with open(path, encoding="utf-8") as file:
        return {line.strip() for line in file if line.strip() and not line.startswith("#")}


def in_ids(sample_id: str, ids: set[str]) -> bool:
    """Whether ``ids`` lists ``sample_id`` or one of its ``-``-prefixes (its line or form)."""
    parts = sample_id.split("-")
    return any("-".join(parts[:end]) in ids for end in range(1, len(parts) + 1))


def load_samples(root: str | Path, kind: str = "lines", subset: str | None = None,
                 split: str | Path = "official", keep_err: bool = False) -> list[Sample]:
    """The samples of an IAM folder; see :func:`load_samples_with_summary`."""
    samples, summary = _load(root, kind, subset, split, keep_err)
    _warn_if_skipped(summary)
    return samples


def load_samples_with_summary(
        root: str | Path, kind: str = "lines", subset: str | None = None,
        split: str | Path = "official", keep_err: bool = False,
) -> tuple[list[Sample], LoadSummary]:
    """The samples of an IAM folder in transcription-file order, and what was left out.

    ``kind``: ``"lines"`` or ``"words"``. ``subset``: ``None`` for all rows, else ``"train"``,
    ``"val"`` or ``"test"`` of ``split`` (see :func:`read_split_ids`; rows in no split file are
    left out; words follow their line's subset). Rows marked ``err`` are dropped unless
    ``keep_err``. Rows whose image is missing or has zero bytes are skipped and counted in one
    :class:`SkippedSamplesWarning`. Raises ``FileNotFoundError`` when ``root`` is not an IAM
    folder.
    """
    samples, summary = _load(root, kind, subset, split, keep_err)
    _warn_if_skipped(summary)
    return samples, summary


def _load(root: str | Path, kind: str, subset: str | None, split: str | Path,
          keep_err: bool) -> tuple[list[Sample], LoadSummary]:
    _check_kind(kind)
    if subset is not None and subset not in SUBSETS:
        raise ValueError(f"subset must be None or one of {SUBSETS}, got {subset!r}")
    records = parse_transcriptions(_require_iam_layout(root, kind), kind)
    kept = [record for record in records if record.ok or keep_err]
    in_subset = records
    if subset is not None:
        ids = read_split_ids(root, split)[subset]
        in_subset = [record for record in records if in_ids(record.id, ids)]
    candidates = [record for record in in_subset if record.ok or keep_err]
    samples, missing, empty = [], [], []
    for record in candidates:
        path = image_path(root, kind, record.id)
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            missing.append(str(path))
            continue
        if size == 0:
            empty.append(str(path))
        else:
            samples.append(Sample(record.id, record.text, str(path)))
    summary = LoadSummary(kind=kind, rows=len(records), err_rows=sum(not r.ok for r in records),
                          err_kept=keep_err, outside_subset=len(kept) - len(candidates),
                          candidates=len(candidates), missing=tuple(missing), empty=tuple(empty),
                          err_dropped=len(in_subset) - len(candidates))
    return samples, summary


def _warn_if_skipped(summary: LoadSummary) -> None:
    """One :class:`SkippedSamplesWarning` when images were skipped, pointing at the caller of
    the public loader."""
    if summary.missing or summary.empty or summary.err_dropped:
        warnings.warn(summary.skipped_message(), SkippedSamplesWarning, stacklevel=3)


def _require_iam_layout(root: str | Path, kind: str) -> Path:
    """``root/ascii/<kind>.txt``, after checking it and the image folder exist."""
    transcriptions = Path(root, "ascii", f"{kind}.txt")
    if not transcriptions.is_file():
        raise FileNotFoundError(
            f"{root} is not an IAM folder: expected {transcriptions} (and images under "
            f"{Path(root, kind)}/). IAM needs registration at {IAM_HOMEPAGE}; download "
            f"ascii.tgz and {kind}.tgz there, unpack them into one folder and pass that folder.")
    if not Path(root, kind).is_dir():
        raise FileNotFoundError(f"{root} has {transcriptions} but no {kind}/ image folder: "
                                f"unpack IAM's {kind}.tgz into {Path(root, kind)}")
    return transcriptions


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
