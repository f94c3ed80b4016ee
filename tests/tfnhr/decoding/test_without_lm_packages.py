"""A plain ``pip install`` leaves the beam search's packages out (the ``lm`` extra and pyctcdecode):
``tfnhr --help``, ``tfnhr info`` and greedy decoding work without them, and asking for a beam
search says in one line what to install. Each case runs in a fresh process where the package
cannot be imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.environment import REPO

WITHOUT = """
import sys
sys.modules[{module!r}] = None  # as if not installed: its import fails
import numpy as np
from tfnhr.cli import main
from tfnhr.charset import Charset
from tfnhr.decoding import DecoderUnavailable, make_decoder
for argv in (["--help"], ["info"]):
    try:
        status = main(argv)
    except SystemExit as stop:
        status = stop.code
    assert status == 0, argv
charset = Charset.from_texts(["ab"])
scores = np.log(np.eye(charset.num_classes)[[1, 0, 2]] + 1e-6)  # a, blank, b
assert make_decoder("greedy", charset).decode_batch([scores]) == ["ab"]
try:
    make_decoder("beam", charset)
except DecoderUnavailable as error:
    print("ERROR", error)
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("module", ["pyctcdecode", "kenlm", "pygtrie"])
def test_everything_but_the_beam_search_works_without_its_packages(module):
    result = subprocess.run([sys.executable, "-c", WITHOUT.format(module=module)], cwd=REPO, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    error = result.stdout.splitlines()[-1]
    assert error == (f"ERROR beam search needs {module}, which is not installed: pip install 'tfnhr[lm]' && "
                     "pip install --no-deps pyctcdecode==0.5.0 (pyctcdecode's metadata asks for numpy<2, which "
                     "TensorFlow 2.18's stack cannot take; it runs on numpy 2)")
