"""tfnhr.serving.graph_images through a SavedModel: every mode the graph reads gives the Python
reader's gray levels within one level; what it would read differently is refused with a message."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.image_modes import cases
from tfnhr.data.images import decode_gray as python_gray
from tfnhr.serving.graph_images import decode_gray

CASES = cases()


@pytest.fixture(scope="module")
def saved_decoder(tmp_path_factory):
    """The graph reader saved and loaded back as a SavedModel signature."""
    module = tf.Module()
    module.gray = tf.function(decode_gray, input_signature=[tf.TensorSpec([], tf.string)])
    path = str(tmp_path_factory.mktemp("decoder"))
    tf.saved_model.save(module, path)
    return tf.saved_model.load(path).gray


@pytest.mark.parametrize("case", [case for case in CASES if case.graph_reads], ids=lambda case: case.name)
def test_the_saved_graph_reads_as_python_does(saved_decoder, case):
    if case.graph_refuses:
        with pytest.raises(tf.errors.InvalidArgumentError, match=case.graph_refuses):
            saved_decoder(tf.constant(case.data))
        return
    gray = saved_decoder(tf.constant(case.data)).numpy()
    expected = python_gray(case.data)
    assert gray.shape == expected.shape
    assert np.abs(gray.astype(int) - expected).max() <= 1


def test_a_file_that_is_no_image_fails_in_the_graph(saved_decoder):
    with pytest.raises(tf.errors.InvalidArgumentError, match="Unknown image file format"):
        saved_decoder(tf.constant(b"not an image at all"))
