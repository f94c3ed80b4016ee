"""A small generated training task shared by the training tests: digit strings as an HDF5 file."""

from __future__ import annotations

import numpy as np

from tfnhr.data.synthetic import digit_strings
from tfnhr.data.formats.hdf5 import TextImageWriter


def digit_set(path, seed=0):
    """The embedded 3x5-bitmap digit strings (1..5 digits, scales 1..3) as an HDF5 text-image file:
    300 training and 40 validation lines."""
    with TextImageWriter(path, source="digit strings") as writer:
        for subset, count, offset in (("train", 300, 0), ("val", 40, 1)):
            data = digit_strings.generate(count, seed=seed + offset, max_digits=5)
            for index, (image, text) in enumerate(zip(data.images, data.texts)):
                writer.add(subset, f"{subset}-{index}", text, np.round(255 * (1 - image[..., 0])).astype(np.uint8))
        writer.close()
    return path
