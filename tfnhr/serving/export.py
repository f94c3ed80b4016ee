"""A trained recognizer as a SavedModel that runs without Python's tfnhr: TF Serving, C++/Java/Go
``LoadSavedModel``, or ``tf.saved_model.load`` in a process that has only TensorFlow.

Everything a reading needs is in the graph: image decoding and conversion to gray
(:mod:`tfnhr.serving.graph_images`: PNG, JPEG, GIF, BMP), scaling to the model's input height
(and to its stroke spacing, for a model trained so), packing (the graph planner,
:mod:`tfnhr.ops.graph_planner`, in plain TensorFlow ops: TF Serving refuses XLA on CPU by default),
the network, greedy CTC decoding and the confidence. Signatures:

``recognize(images: string [B])`` -> ``text: string [B]``, ``confidence: float32 [B]``
    Encoded image files. Gray levels as :func:`tfnhr.data.images.load_gray` gives them (within one
    level; 16-bit samples, colour, alpha and EXIF orientation included), scaled as
    :func:`tfnhr.data.images.scale_to_height` (bilinear, antialiased; TensorFlow's resampling,
    not Pillow's, so a scaled image may differ by a gray level here and there), for a model
    trained on normalized stroke spacing scaled in width as
    :func:`tfnhr.data.spacing.normalize_spacing` does (:func:`normalize_spacing_graph`), then
    ``1 - gray / 255`` as in training. ``text`` is the best path (greedy decoding), ``confidence``
    :func:`tfnhr.recognition.transcriber.confidence`. Also the ``serving_default`` signature.
``scores(images: float32 [B, H, W], heights: int32 [B], widths: int32 [B])`` -> ``scores: float32 [B, T, K]``, ``lengths: int32 [B]``
    The ragged batch of already scaled ink images (``1 - gray / 255``, example ``i`` in the top-left
    ``heights[i] x widths[i]`` corner) and its per-column logits, padded to the longest
    (``lengths[i]`` columns are example ``i``'s; class 0 is the CTC blank, class ``k`` the
    ``k``-th character of ``charset``).
``charset()`` -> ``charset: string [K]`` (entry 0 empty: the blank), ``input_height: int32`` (0: none),
``stroke_spacing: float32`` (0: none; else the ``scores`` signature's images must have their widths
scaled to it, as :func:`tfnhr.data.spacing.normalize_spacing` does).

The export directory follows TF Serving's layout: ``OUT/<version>/saved_model.pb``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import tensorflow as tf

from tfnhr.charset import BLANK_INDEX
from tfnhr.config.options import OptionError
from tfnhr.data.spacing import FACTOR_LIMITS, MIN_CONTRAST, PAPER_RANK
from tfnhr.models.ctc_model import CtcModel
from tfnhr.serving.graph_images import decode_gray, scale_gray

SIGNATURES = ("recognize", "scores", "charset", "serving_default")
"""The signature names of an export (``serving_default`` is ``recognize``)."""


def spacing_factor_graph(gray: tf.Tensor, target: float) -> tf.Tensor:
    """float64 scalar: :func:`tfnhr.data.spacing.spacing_factor` of uint8 ``[H, W]`` gray in
    TensorFlow ops (the same integer counts, so the same value)."""
    values = tf.cast(gray, tf.int64)
    flat = tf.sort(tf.reshape(values, [-1]))
    rank = tf.cast(tf.floor(PAPER_RANK * tf.cast(tf.size(flat) - 1, tf.float64)), tf.int32)
    paper, darkest = flat[rank], flat[0]

    def factor():
        ink = 2 * values < paper + darkest
        row_ink = tf.reduce_sum(tf.cast(ink, tf.int64), axis=1)
        core_ink = tf.boolean_mask(ink, 2 * row_ink >= tf.reduce_max(row_ink))
        starts = (tf.reduce_sum(tf.cast(core_ink[:, :1], tf.float64), axis=1)
                  + tf.reduce_sum(tf.cast(core_ink[:, 1:] & ~core_ink[:, :-1], tf.float64), axis=1))
        columns = tf.where(tf.reduce_any(ink, axis=0))[:, 0]
        extent = tf.cast(columns[-1] - columns[0] + 1, tf.float64)
        spacing = (extent / tf.maximum(tf.constant(1.0, tf.float64), tf.reduce_mean(starts))
                   / tf.cast(tf.shape(gray)[0], tf.float64))
        low, high = FACTOR_LIMITS
        return tf.clip_by_value(target / spacing, low, high)

    return tf.cond(paper - darkest < MIN_CONTRAST, lambda: tf.constant(1.0, tf.float64), factor)


def normalize_spacing_graph(gray: tf.Tensor, target: float) -> tf.Tensor:
    """:func:`tfnhr.data.spacing.normalize_spacing` of uint8 ``[H, W]`` gray in TensorFlow ops:
    the width ``max(1, round(W * factor))`` (half to even), area averaging when narrowing, bilinear
    when widening (TensorFlow's resampling, not OpenCV's: a gray level may differ here and there)."""
    factor = spacing_factor_graph(gray, target)
    size = tf.shape(gray, out_type=tf.int64)
    width = tf.maximum(tf.constant(1, tf.int64), tf.cast(tf.round(tf.cast(size[1], tf.float64) * factor), tf.int64))
    new_size = tf.cast(tf.stack([size[0], width]), tf.int32)
    image = tf.cast(gray, tf.float32)[..., None]

    def resize(method):
        return lambda: tf.cast(tf.clip_by_value(tf.round(tf.image.resize(image, new_size, method=method)[..., 0]),
                                                0, 255), tf.uint8)

    return tf.case([(tf.equal(factor, 1.0), lambda: gray), (factor < 1.0, resize("area"))], default=resize("bilinear"))


def greedy_texts(scores: tf.RaggedTensor, chars: tf.Tensor) -> tf.Tensor:
    """Best-path texts of ragged ``[B, (T), K]`` scores: argmax per column (first maximum), repeats
    collapsed, blanks dropped; ``chars[k]`` is class ``k``'s string (``chars[0]`` the blank's, empty)."""
    best = tf.ragged.map_flat_values(lambda values: tf.argmax(values, axis=-1, output_type=tf.int32), scores)
    classes = best.flat_values
    first = tf.equal(tf.ragged.range(best.row_lengths()).flat_values, 0)  # an example's first column
    previous = tf.concat([[-1], classes[:-1]], axis=0)
    keep = best.with_flat_values(tf.not_equal(classes, BLANK_INDEX) & (first | tf.not_equal(classes, previous)))
    return tf.strings.reduce_join(tf.gather(chars, tf.ragged.boolean_mask(best, keep)), axis=1)


def confidences(scores: tf.RaggedTensor) -> tf.Tensor:
    """float32 ``[B]``: per example, the geometric mean over its columns of the best class's
    probability (1 for no columns), as :func:`tfnhr.recognition.transcriber.confidence`."""
    best_log_probability = tf.ragged.map_flat_values(
        lambda values: tf.reduce_max(tf.nn.log_softmax(values, axis=-1), axis=-1), scores)
    mean = tf.math.divide_no_nan(tf.reduce_sum(best_log_probability, axis=1),
                                 tf.cast(best_log_probability.row_lengths(), tf.float32))
    return tf.exp(mean)


class _Untracked:
    """Holds a value out of ``tf.Module``'s attribute tracking."""

    def __init__(self, value) -> None:
        self.value = value


class RecognizerExport(tf.Module):
    """The serving functions around a trained recognizer (see the module docstring).

    Args:
      model: a :class:`~tfnhr.models.CtcModel`. Trace the functions under :func:`plain_planner`
        so that its packing is planned in plain TensorFlow ops (same layout, same outputs).
    """

    def __init__(self, model: CtcModel) -> None:
        super().__init__(name="tfnhr_recognizer")
        self._model = _Untracked(model)  # Keras layers hold Python state SavedModel cannot save
        self.model_variables = list(model.variables)  # what the SavedModel saves of the model
        self.height = model.input_height
        self.spacing = model.stroke_spacing
        self.chars = tf.constant([""] + list(model.charset.chars))

    def _scores(self, images: tf.RaggedTensor) -> tf.RaggedTensor:
        """Ragged ``[B, (H), (W), 1]`` ink -> ragged ``[B, (T), K]`` float32 logits."""
        scores = self._model.value(images, training=False)
        return tf.ragged.map_flat_values(lambda values: tf.cast(values, tf.float32), scores)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")])
    def recognize(self, images: tf.Tensor) -> dict[str, tf.Tensor]:
        count = tf.size(images)
        pixels = tf.TensorArray(tf.float32, size=count, infer_shape=False, element_shape=[None])
        sizes = tf.TensorArray(tf.int64, size=count, element_shape=[2])
        for index in tf.range(count):
            gray = scale_gray(decode_gray(images[index]), self.height)
            if self.spacing is not None:
                gray = normalize_spacing_graph(gray, self.spacing)
            pixels = pixels.write(index, tf.reshape(1.0 - tf.cast(gray, tf.float32) / 255.0, [-1]))
            sizes = sizes.write(index, tf.cast(tf.shape(gray), tf.int64))  # (a cast: no shape-tensor type in the list)
        heights, widths = tf.unstack(sizes.stack(), num=2, axis=1)
        ink = tf.RaggedTensor.from_nested_row_lengths(
            pixels.concat()[:, None], [heights, tf.repeat(widths, heights)], validate=False)
        scores = self._scores(ink)
        return {"text": greedy_texts(scores, self.chars), "confidence": confidences(scores)}

    @tf.function(input_signature=[tf.TensorSpec([None, None, None], tf.float32, name="images"),
                                  tf.TensorSpec([None], tf.int32, name="heights"),
                                  tf.TensorSpec([None], tf.int32, name="widths")])
    def scores(self, images: tf.Tensor, heights: tf.Tensor, widths: tf.Tensor) -> dict[str, tf.Tensor]:
        ink = tf.RaggedTensor.from_tensor(images[..., None], lengths=(heights, tf.repeat(widths, heights)))
        scores = self._scores(ink)
        return {"scores": scores.to_tensor(), "lengths": tf.cast(scores.row_lengths(), tf.int32)}

    @tf.function(input_signature=[])
    def charset(self) -> dict[str, tf.Tensor]:
        return {"charset": self.chars, "input_height": tf.constant(self.height or 0, tf.int32),
                "stroke_spacing": tf.constant(self.spacing or 0.0, tf.float32)}


@contextlib.contextmanager
def plain_planner(model: CtcModel) -> Iterator[None]:
    """Inside, the model's MDLSTMs plan packing in plain TensorFlow ops (``packing_planner="graph"``:
    no XLA, which TF Serving refuses on CPU by default) and scan with TensorFlow ops
    (``scan_kernel="ops"``: a SavedModel must not need tfnhr's compiled kernel library); their
    settings are restored on leaving."""
    layers = [layer for layer in model._flatten_layers() if hasattr(layer, "packing_planner")]
    previous = [(layer.packing_planner, layer.scan_kernel) for layer in layers]
    for layer in layers:
        layer.packing_planner, layer.scan_kernel = "graph", "ops"
    try:
        yield
    finally:
        for layer, (planner, kernel) in zip(layers, previous):
            layer.packing_planner, layer.scan_kernel = planner, kernel


def next_version(out: Path) -> int:
    """One more than the highest numbered version folder in ``out`` (1 for none)."""
    versions = [int(path.name) for path in out.iterdir() if path.name.isdigit()] if out.is_dir() else []
    return max(versions, default=0) + 1


def export_recognizer(model: CtcModel, out: str | Path, version: int | None = None) -> Path:
    """Write ``model`` as a SavedModel into ``out/<version>/`` (TF Serving's layout).

    Args:
      model: a trained recognizer.
      out: the model's base directory (created if missing).
      version: the version folder; ``None``: one more than the highest there (1 in a new one).
    Returns:
      The version directory written.
    Raises:
      OptionError: ``out/<version>`` exists already.
    """
    out = Path(out)
    version = next_version(out) if version is None else version
    target = out / str(version)
    if target.exists():
        raise OptionError("{target} exists already: choose another {version} or remove it",
                          target=target, version=("version", "--version"))
    module = RecognizerExport(model)
    with plain_planner(model):  # the functions are traced while saving
        tf.saved_model.save(module, str(target), signatures={
            "recognize": module.recognize, "scores": module.scores, "charset": module.charset,
            "serving_default": module.recognize},
            # inference only: the custom gradients of packing and of the MDLSTM scan capture graph
            # tensors that a SavedModel cannot hold (loading then warns that they were not saved)
            options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
    return target
