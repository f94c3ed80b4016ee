"""A miniature IAM folder in the real layout, for tests (no IAM download needed).

Forms ``a01-000u`` and ``a01-007`` are in the official train / validation1 sets, ``b02-010`` in
the test set, ``c03-003`` in validation2 only and ``d04-050`` in no split file. Special rows:
``a01-000u-02`` is ``err``; ``a01-007-00`` has a space inside its transcription field;
``a01-007-01`` has no image and ``b02-010-01`` a zero-byte one; among the words, ``a01-000u-00-01``
is ``err`` with a -1 box, ``a01-007-00-01`` has no image and ``b02-010-00-00`` a zero-byte one.
"""

from __future__ import annotations

import dataclasses
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

LINES_TXT = """\
#--- lines.txt ---------------------------------------------------------------#
#
# iam database line information
#
# format: a01-000u-00 ok 154 19 408 746 1661 89 A|MOVE|to|stop|Mr.|Gaitskell|from
#
a01-000u-00 ok 154 19 408 746 1661 89 A|MOVE|to|stop|Mr.|Gaitskell|from
a01-000u-01 ok 156 19 395 932 1850 105 nominating|any|more|Labour|life|Peers
a01-000u-02 err 157 16 408 1106 1632 88 is|to|be|made|at|a|meeting|of|Labour
a01-007-00 ok 160 10 380 700 1500 90 Mr.|Michael Foot|has
a01-007-01 ok 161 8 390 800 1400 92 put|down|a|resolution
b02-010-00 ok 170 12 400 700 1600 95 on|the|subject|and|he
b02-010-01 ok 171 9 401 800 1620 96 is|to|be|backed
c03-003-00 ok 150 5 300 600 1200 80 by|Mr.|Will|Griffiths,
d04-050-00 ok 149 7 310 610 1210 81 M.P.|for|Manchester
"""

WORDS_TXT = """\
#--- words.txt ---------------------------------------------------------------#
#
# format: a01-000u-00-00 ok 154 408 768 27 51 AT A
#
a01-000u-00-00 ok 154 408 768 27 51 AT A
a01-000u-00-01 err 154 -1 -1 -1 -1 NN MOVE
a01-000u-01-00 ok 156 395 932 441 75 VBG nominating
a01-007-00-00 ok 160 380 700 60 50 NPT Mr.
a01-007-00-01 ok 160 450 700 150 52 NP Michael
b02-010-00-00 ok 170 400 700 40 48 IN on
b02-010-00-01 ok 170 450 700 60 48 ATI the
c03-003-00-00 ok 150 300 600 40 45 IN by
d04-050-00-00 ok 149 310 610 80 44 NP M.P.
"""

MISSING = {"a01-007-01", "a01-007-00-01"}
"""Ids whose image file is not written."""
EMPTY = {"b02-010-01", "b02-010-00-00"}
"""Ids whose image file has zero bytes."""

OFFICIAL_SPLIT = {
    "trainset.txt": "a01-000u-00\na01-000u-01\na01-000u-02\n",
    "validationset1.txt": "a01-007-00\na01-007-01\n",
    "validationset2.txt": "c03-003-00\n",
    "testset.txt": "b02-010-00\nb02-010-01\n",
}
SEED_SPLIT = {  # form ids, line ids, a comment and a blank line; d04-050 in test here
    "train.lst": "a01-000u\n\nc03-003\n",
    "valid.txt": "# validation forms\na01-007\n",
    "test.txt": "b02-010-00\nb02-010-01\nd04-050-00\n",
}


@dataclasses.dataclass(frozen=True)
class IamTree:
    """A written tree: ``root`` (the IAM folder), ``seed_split`` (a folder of seed-style split
    files) and ``images`` (id -> the uint8 ``[H, W]`` gray image written for it)."""

    root: Path
    seed_split: Path
    images: dict[str, np.ndarray]


def write_iam_tree(root: Path) -> IamTree:
    """Write the miniature IAM folder under ``root`` (and the seed split in ``root/seed_split``)."""
    (root / "ascii").mkdir(parents=True)
    (root / "ascii" / "lines.txt").write_text(LINES_TXT)
    (root / "ascii" / "words.txt").write_text(WORDS_TXT)
    images = {}
    for kind, text in (("lines", LINES_TXT), ("words", WORDS_TXT)):
        for sample_id in (row.split()[0] for row in text.splitlines() if not row.startswith("#")):
            form_parts = sample_id.split("-")
            path = root / kind / form_parts[0] / "-".join(form_parts[:2]) / f"{sample_id}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            if sample_id in EMPTY:
                path.touch()
            elif sample_id not in MISSING:
                images[sample_id] = _image(sample_id)
                Image.fromarray(images[sample_id]).save(path)
    for folder, files in ((root / "largeWriterIndependentTextLineRecognitionTask", OFFICIAL_SPLIT),
                          (root / "seed_split", SEED_SPLIT)):
        folder.mkdir()
        for name, content in files.items():
            (folder / name).write_text(content)
    return IamTree(root, root / "seed_split", images)


def _image(sample_id: str) -> np.ndarray:
    """A small random gray image, different per id and the same on every run."""
    rng = np.random.default_rng(zlib.crc32(sample_id.encode()))
    height, width = int(rng.integers(5, 12)), int(rng.integers(8, 40))
    return rng.integers(0, 256, size=(height, width), dtype=np.uint8)
