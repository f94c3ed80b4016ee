"""Process settings for fast CapsNet/MLCN training on CPUs; they must precede TensorFlow's import.

TensorFlow 2.18's CPU wheel leaves its oneDNN kernels off. For the capsule networks' 9×9
convolutions they are faster: an MLCN (2 lanes × width 4) training step 0.44 s instead of
0.62–0.84 s, a CapsNet step 4.2 s instead of 5.2 s (batch 100, one thread, this project's
machines). The ``capsnet`` command and the capsnet benchmarks turn them on; in a notebook, call
``prefer_onednn()`` before importing TensorFlow, or set ``TF_ENABLE_ONEDNN_OPTS=1``.
"""

from __future__ import annotations

import os
import sys


def prefer_onednn() -> bool:
    """Set ``TF_ENABLE_ONEDNN_OPTS=1`` unless the variable is already set; returns whether oneDNN
    will be on. Once ``tensorflow`` is imported the setting is fixed and this changes nothing."""
    if "tensorflow" not in sys.modules:
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    return os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "1"
