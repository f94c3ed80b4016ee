"""``tfnhr export``: the SavedModel runs in a process without tfnhr and gives what ``tfnhr recognize``
gives; the folder layout is TF Serving's; the in-graph decoding equals the NumPy decoders.

References: ``tfnhr recognize --format json`` (a separate process running the Keras model),
:class:`tfnhr.recognition.transcriber.Transcriber` scores, :func:`tfnhr.decoding.greedy_decode` and
:func:`tfnhr.recognition.transcriber.confidence`, Pillow's resizing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.helpers.environment import VENV_BIN
from tests.helpers.tiny_models import CHARSET, tiny_recognizer
from tfnhr.data.images import load_gray, scale_to_height, to_ink
from tfnhr.decoding import greedy_decode
from tests.tfnhr.recognition.test_transcriber import TARGET_SPACING, spacing_recognizer, text_lines
from tfnhr.data.spacing import normalize_spacing, spacing_factor
from tfnhr.serving.export import (confidences, export_recognizer, greedy_texts, normalize_spacing_graph, scale_gray,
                                  spacing_factor_graph)
from tfnhr.recognition.transcriber import Transcriber, confidence
from tfnhr.models import build_recognizer

FRESH_PROCESS = textwrap.dedent("""
    import importlib.util, json, sys
    sys.path.append(sys.argv[1])  # site-packages without its .pth files (-S: no editable tfnhr); -I: no cwd
    assert importlib.util.find_spec("tfnhr") is None, "tfnhr is importable"
    assert not any("tfnhr" in entry or entry == "" for entry in sys.path[:-1]), sys.path
    import numpy as np
    import tensorflow as tf
    export, request = sys.argv[2], json.load(open(sys.argv[3]))
    model = tf.saved_model.load(export)
    images = tf.constant([open(path, "rb").read() for path in request["images"]])
    read = model.signatures["recognize"](images=images)
    served = model.signatures["serving_default"](images=images)
    ink = np.load(request["ink"])
    scores = model.signatures["scores"](images=tf.constant(ink["images"]), heights=tf.constant(ink["heights"]),
                                        widths=tf.constant(ink["widths"]))
    info = model.signatures["charset"]()
    np.savez(request["out"], scores=scores["scores"].numpy(), lengths=scores["lengths"].numpy())
    json.dump({"text": [t.decode() for t in read["text"].numpy()], "confidence": read["confidence"].numpy().tolist(),
               "served": [t.decode() for t in served["text"].numpy()],
               "charset": [c.decode() for c in info["charset"].numpy()],
               "input_height": int(info["input_height"])}, sys.stdout)
""")


def _tfnhr(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "tfnhr"), *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The tiny recognizer saved, exported with the CLI, and a set of line images: gray, RGB and
    RGBA PNGs at the model's height (no scaling) and images that must be scaled (PNG, JPEG)."""
    root = tmp_path_factory.mktemp("export")
    model = tiny_recognizer()
    model.save(root / "model.keras")
    result = _tfnhr("export", "--model", str(root / "model.keras"), "--out", str(root / "served"))
    assert result.returncode == 0, result.stderr
    rng = np.random.default_rng(11)
    exact, scaled = [], []
    for number, (height, width, mode) in enumerate([(16, 40, "L"), (16, 57, "RGB"), (16, 23, "RGBA"), (16, 9, "L"),
                                                     (31, 70, "L"), (12, 30, "L"), (40, 90, "JPEG")]):
        pixels = rng.integers(0, 256, (height, width, 4)).astype(np.uint8)
        if mode in ("L", "JPEG"):
            image = Image.fromarray(pixels[..., 0])
        else:
            image = Image.fromarray(pixels[..., :len(mode)], mode)
        path = root / f"line{number}.{'jpg' if mode == 'JPEG' else 'png'}"
        image.save(path)
        (exact if height == 16 and mode != "JPEG" else scaled).append(path)
    return {"root": root, "model": model, "export": root / "served" / "1", "exact": exact, "scaled": scaled}


@pytest.mark.slow
@pytest.mark.subprocess
def test_export_leaves_the_models_planner_and_scan_as_they_were(exported, tmp_path):
    model = exported["model"]
    settings = {(layer.packing_planner, layer.scan_kernel) for layer in model.mdlstms}
    export_recognizer(model, tmp_path / "again")
    assert {(layer.packing_planner, layer.scan_kernel) for layer in model.mdlstms} == settings == {("xla", "auto")}


@pytest.mark.slow
@pytest.mark.subprocess
def test_export_needs_no_compiled_kernel(exported):
    """The training model scans with the compiled C++ ops; the SavedModel must not: TF Serving
    does not have tfnhr's kernel library."""
    assert {layer.scan_kernel_mode() for layer in exported["model"].mdlstms} == {"compiled"}
    graph = (exported["export"] / "saved_model.pb").read_bytes()
    assert b"MDLSTM" in graph or b"mdlstm" in graph  # the layers are in there
    assert b"TfnhrMdlstmScan" not in graph


@pytest.mark.slow
@pytest.mark.subprocess
def test_export_folder_is_tf_serving_layout_and_versions_count_up(exported):
    root = exported["root"]
    assert (exported["export"] / "saved_model.pb").is_file()
    assert (exported["export"] / "variables" / "variables.index").is_file()
    again = _tfnhr("export", "--model", str(root / "model.keras"), "--out", str(root / "served"))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["export"] == str(root / "served" / "2")
    taken = _tfnhr("export", "--model", str(root / "model.keras"), "--out", str(root / "served"), "--version", "1")
    assert taken.returncode == 2
    assert taken.stderr.strip().splitlines() == [
        f"tfnhr export: error: {root / 'served' / '1'} exists already: choose another --version or remove it"]


@pytest.mark.slow
@pytest.mark.subprocess
def test_fresh_process_without_tfnhr_reads_what_recognize_reads(exported, tmp_path):
    """The export, loaded by a Python that cannot import tfnhr, against ``tfnhr recognize`` (texts,
    confidences) and the Keras model's column scores."""
    model, paths = exported["model"], exported["exact"] + exported["scaled"]
    grays = [scale_to_height(load_gray(path), model.input_height) for path in exported["exact"]]
    heights, widths = (np.array(sizes, np.int32) for sizes in zip(*(gray.shape for gray in grays)))
    ink = np.zeros((len(grays), heights.max(), widths.max()), np.float32)
    for number, gray in enumerate(grays):
        ink[number, :gray.shape[0], :gray.shape[1]] = to_ink(gray)[..., 0]
    np.savez(tmp_path / "ink.npz", images=ink, heights=heights, widths=widths)
    request = {"images": [str(path) for path in paths], "ink": str(tmp_path / "ink.npz"), "out": str(tmp_path / "out.npz")}
    (tmp_path / "request.json").write_text(json.dumps(request))
    fresh = subprocess.run([sys.executable, "-I", "-S", "-c", FRESH_PROCESS, sysconfig.get_paths()["purelib"],
                            str(exported["export"]), str(tmp_path / "request.json")],
                           capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    served = json.loads(fresh.stdout)
    recognized = _tfnhr("recognize", "--model", str(exported["root"] / "model.keras"), "--format", "json",
                        *map(str, paths))
    assert recognized.returncode == 0, recognized.stderr
    reference = json.loads(recognized.stdout)

    assert served["charset"] == [""] + CHARSET.chars and served["input_height"] == model.input_height
    assert served["served"] == served["text"]
    exact = len(exported["exact"])
    assert served["text"] == [result["text"] for result in reference]
    assert len(set(served["text"])) > 2, served["text"]  # the model reads varied texts: a real comparison
    # recognize's JSON rounds confidences to 4 decimals
    np.testing.assert_allclose(served["confidence"][:exact], [r["confidence"] for r in reference[:exact]], atol=6e-5)
    # scaled images: TensorFlow's antialiased bilinear resampling, not Pillow's (gray levels within 1)
    np.testing.assert_allclose(served["confidence"][exact:], [r["confidence"] for r in reference[exact:]], atol=0.02)

    scores = np.load(tmp_path / "out.npz")
    for number, expected in enumerate(Transcriber(model).scores(grays)):
        assert scores["lengths"][number] == len(expected)
        np.testing.assert_allclose(scores["scores"][number, :len(expected)], expected, atol=1e-5)


@pytest.mark.parametrize("height, width, target", [(31, 70, 16), (12, 30, 16), (40, 90, 16), (48, 333, 32)])
def test_in_graph_scaling_is_within_one_gray_level_of_pillow(height, width, target):
    gray = np.random.default_rng(height).integers(0, 256, (height, width)).astype(np.uint8)
    expected = scale_to_height(gray, target)
    scaled = scale_gray(tf.constant(gray), target).numpy()
    assert scaled.shape == expected.shape
    assert np.abs(scaled.astype(int) - expected).max() <= 1


def test_in_graph_decoding_equals_numpy_decoders():
    """Greedy texts (repeats, blanks, ties: the first maximum wins) and confidences of a ragged
    batch, an empty example included."""
    rng = np.random.default_rng(5)
    chars = [""] + CHARSET.chars
    examples = [rng.integers(-2, 3, (length, CHARSET.num_classes)).astype(np.float32)  # integer scores: many ties
                for length in (9, 1, 0, 30)]
    ragged = tf.ragged.constant([example.tolist() for example in examples], ragged_rank=1,
                                inner_shape=(CHARSET.num_classes,), dtype=tf.float32)
    texts = [text.decode() for text in greedy_texts(ragged, tf.constant(chars)).numpy()]
    assert texts == [greedy_decode(example, CHARSET) for example in examples]
    np.testing.assert_allclose(confidences(ragged).numpy(), [confidence(example) for example in examples], rtol=1e-6)


def test_in_graph_stroke_spacing_is_the_numpy_estimate():
    """:func:`spacing_factor_graph` gives :func:`spacing_factor`'s value to the bit (integer counts
    on both sides); the normalized widths are equal, the gray levels TensorFlow's resampling's."""
    lines = text_lines()
    rng = np.random.default_rng(2)
    lines += [rng.integers(0, 256, (h, w)).astype(np.uint8) for h, w in ((7, 40), (20, 9), (33, 150))]
    for gray in lines:
        for target in (0.1, 0.3, 0.6):
            assert float(spacing_factor_graph(tf.constant(gray), target)) == spacing_factor(gray, target)
            expected = normalize_spacing(gray, target)
            normalized = normalize_spacing_graph(tf.constant(gray), target).numpy()
            assert normalized.shape == expected.shape
            if expected is gray:
                np.testing.assert_array_equal(normalized, gray)


@pytest.mark.slow
def test_an_export_of_a_model_trained_on_normalized_spacing_reads_as_the_model_does(tmp_path):
    model = spacing_recognizer()
    grays = text_lines()
    paths = []
    for number, gray in enumerate(grays):
        paths.append(tmp_path / f"line{number}.png")
        Image.fromarray(gray).save(paths[-1])
    served = tf.saved_model.load(str(export_recognizer(model, tmp_path / "served")))
    read = served.signatures["recognize"](images=tf.constant([path.read_bytes() for path in paths]))
    texts, scores = Transcriber(model).texts_and_scores(grays)
    assert [text.decode() for text in read["text"].numpy()] == texts
    np.testing.assert_allclose(read["confidence"].numpy(), [confidence(s) for s in scores], atol=0.02)
    assert float(served.signatures["charset"]()["stroke_spacing"]) == pytest.approx(TARGET_SPACING)


@pytest.mark.slow
def test_an_export_of_a_model_with_a_stem_scores_as_the_model_does(tmp_path):
    """A stem's convolutions pad each example on its own in the exported graph too: the served
    column scores of lines of different widths, read together, are the Keras model's."""
    keras.utils.set_random_seed(5)
    model = build_recognizer(CHARSET, mdlstm_units=(3, 4), conv_filters=(3, 5), stem_filters=(4,), block=(2, 2),
                             input_height=16)
    rng = np.random.default_rng(5)
    grays = [rng.integers(0, 256, (16, width)).astype(np.uint8) for width in (40, 13, 57)]
    served = tf.saved_model.load(str(export_recognizer(model, tmp_path / "served")))
    ink = np.zeros((len(grays), 16, 57), np.float32)
    for number, gray in enumerate(grays):
        ink[number, :, :gray.shape[1]] = to_ink(gray)[..., 0]
    scores = served.signatures["scores"](images=tf.constant(ink), heights=tf.constant([16] * 3),
                                         widths=tf.constant([gray.shape[1] for gray in grays]))
    for number, expected in enumerate(Transcriber(model).scores(grays)):
        assert int(scores["lengths"][number]) == len(expected)
        np.testing.assert_allclose(scores["scores"][number, :len(expected)].numpy(), expected, atol=1e-5)
