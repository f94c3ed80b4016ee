"""CapsNet (Sabour et al. 2017) and the Multi-Lane CapsNet (MLCN) with lanes pinned to devices.

Both are ``keras.Model`` subclasses: ``model(images)`` returns class-capsule lengths ``[B, K]``
(class probabilities in [0, 1)); ``model.fit((images, labels))`` trains with the margin loss plus
the masked reconstruction loss, so they work from notebooks like any Keras model. Images are
float ``[B, H, W, C]`` in [0, 1]; labels are int ``[B]`` or one-hot ``[B, K]``.

MLCN semantics (see ``docs/capsnet.md`` for where this follows or leaves the public code):
lane ``l`` = ``depth`` conv stages of ``16·width`` filters -> primary capsules (``2·width`` maps
of 8D, 9×9, stride 2) -> dynamic routing to ``K`` one-dimensional outputs, left unsquashed. Lane
``l``'s output is dimension ``l`` of every class capsule; the class capsules ``[B, K, L]`` are
squashed over their ``L`` dimensions, so a length is a class probability as in CapsNet. Lanes are
data-independent until that assembly, and each runs under ``tf.device(placement[l])``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Mapping, Sequence

import keras
import tensorflow as tf

from capsnet.capsules import CapsuleLength, CapsuleMask, PrimaryCapsules, RoutingCapsules, one_hot_labels, squash
from capsnet.devices import resolve_devices
from capsnet.lanes import as_lane
from capsnet.losses import RECONSTRUCTION_WEIGHT, margin_loss, reconstruction_loss

# A placement given to load_model() replaces the saved one while the model is rebuilt.
_placement_override: contextvars.ContextVar = contextvars.ContextVar("placement_override", default=None)


def device_scope(device: str | None):
    """``tf.device(device)``, or no scope at all for ``None`` (TensorFlow's default placement)."""
    return tf.device(device) if device else contextlib.nullcontext()


class CapsuleClassifier(keras.Model):
    """Shared part of CapsNet and MLCN: lengths, margin loss, masked decoder, metrics, config.

    Subclasses implement ``class_capsules(images, training) -> [B, K, D]``. The decoder is
    Dense 512-1024-``H·W·C`` (sigmoid) on the masked class capsules; the reconstruction loss is
    ``reconstruction_weight · mean((x - x̂)²)`` per example. Everything but the subclass's own
    feature extraction runs under ``tf.device(main_device)`` when one is given.
    """

    def __init__(self, input_shape: Sequence[int], n_class: int, routings: int = 3,
                 decoder_units: Sequence[int] = (512, 1024),
                 reconstruction_weight: float = RECONSTRUCTION_WEIGHT,
                 main_device: str | None = None, **kwargs):
        super().__init__(**kwargs)
        if len(input_shape) != 3 or min(input_shape) < 1:
            raise ValueError(f"input_shape must be (height, width, channels), got {tuple(input_shape)}")
        if n_class < 2:
            raise ValueError(f"n_class must be >= 2, got {n_class}")
        self.image_shape = tuple(int(n) for n in input_shape)
        self.n_class, self.routings = int(n_class), int(routings)
        self.decoder_units = tuple(int(n) for n in decoder_units)
        self.reconstruction_weight = float(reconstruction_weight)
        self.main_device = resolve_devices([main_device])[0] if main_device else None
        self.length = CapsuleLength(name="length")
        self.mask = CapsuleMask(name="mask")
        self.decoder = keras.Sequential(  # names fixed, not counted: variable paths are the same in every model
            [keras.layers.Dense(n, activation="relu", name=f"hidden{i + 1}") for i, n in enumerate(self.decoder_units)]
            + [keras.layers.Dense(math.prod(self.image_shape), activation="sigmoid", name="pixels"),
               keras.layers.Reshape(self.image_shape, name="image")],
            name="decoder")
        self.trackers = {name: keras.metrics.Mean(name=name)
                         for name in ("loss", "margin_loss", "reconstruction_loss")}
        self.accuracy = keras.metrics.SparseCategoricalAccuracy(name="accuracy")

    def class_capsules(self, images, training=False) -> tf.Tensor:
        """``[B, H, W, C]`` -> class capsules ``[B, K, D]``."""
        raise NotImplementedError

    def build(self, input_shape=None):
        """Create every weight, each under its device scope, by one forward pass on a zero image.

        Subclasses call it at the end of ``__init__``; ``input_shape`` is the fixed image shape.
        """
        if input_shape is not None and tuple(input_shape[1:]) != self.image_shape:
            raise ValueError(f"this model takes images of shape {self.image_shape}, got {tuple(input_shape)}")
        capsules = self.class_capsules(tf.zeros((1, *self.image_shape)))
        with device_scope(self.main_device):
            self.decoder(self.mask(capsules))
        self.built = True

    def call(self, images, training=False):
        capsules = self.class_capsules(images, training=training)
        with device_scope(self.main_device):
            return self.length(capsules)

    def reconstruct(self, images, labels=None) -> tf.Tensor:
        """Decoder output ``[B, H, W, C]`` from the label's capsule, or the longest if ``labels`` is None."""
        capsules = self.class_capsules(images)
        with device_scope(self.main_device):
            return self.decoder(self.mask(capsules, labels))

    def losses_and_lengths(self, images, labels, training=False):
        """Per-example ``(margin [B], reconstruction [B], lengths [B, K])``; the decoder sees the label's capsule."""
        capsules = self.class_capsules(images, training=training)
        with device_scope(self.main_device):
            lengths = self.length(capsules)
            reconstructions = self.decoder(self.mask(capsules, labels), training=training)
            return (margin_loss(labels, lengths),
                    reconstruction_loss(images, reconstructions, self.reconstruction_weight), lengths)

    def train_step(self, data):
        images, labels, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            margin, recon, lengths = self.losses_and_lengths(images, labels, training=True)
            loss = _weighted_mean(margin + recon, sample_weight)
        variables = self.trainable_variables
        self.optimizer.apply(self.gradients(tape, loss, variables), variables)
        return self._update_metrics(labels, margin, recon, lengths, sample_weight)

    def parameter_count(self) -> int:
        """Parameters of the whole model (one spread over processes counts every process's share)."""
        return self.count_params()

    def gradients(self, tape: tf.GradientTape, loss: tf.Tensor, variables: list) -> list:
        """``d loss / d variables`` for ``train_step`` (:func:`colocated_gradients`); a model whose
        weights are spread over processes adds its exchange here."""
        return colocated_gradients(tape, loss, variables)

    def test_step(self, data):
        images, labels, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        margin, recon, lengths = self.losses_and_lengths(images, labels)
        return self._update_metrics(labels, margin, recon, lengths, sample_weight)

    def _update_metrics(self, labels, margin, recon, lengths, sample_weight) -> dict:
        for name, value in (("loss", margin + recon), ("margin_loss", margin), ("reconstruction_loss", recon)):
            self.trackers[name].update_state(value, sample_weight=sample_weight)
        class_ids = tf.argmax(one_hot_labels(labels, self.n_class), axis=-1)
        self.accuracy.update_state(class_ids, lengths, sample_weight=sample_weight)
        return {m.name: m.result() for m in self.metrics}

    @property
    def metrics(self):
        return [*self.trackers.values(), self.accuracy]

    def get_config(self) -> dict:
        return {**super().get_config(), "input_shape": list(self.image_shape), "n_class": self.n_class,
                "routings": self.routings, "decoder_units": list(self.decoder_units),
                "reconstruction_weight": self.reconstruction_weight, "main_device": self.main_device}


@keras.saving.register_keras_serializable(package="capsnet")
class CapsNet(CapsuleClassifier):
    """Sabour et al.: Conv 256@9×9 (ReLU) -> PrimaryCaps 32×8D (9×9, stride 2) -> K×16D routing capsules.

    On 28×28×1 with 10 classes: 1152 primary capsules and 8.2 M parameters with the decoder.
    """

    def __init__(self, input_shape: Sequence[int], n_class: int, routings: int = 3, conv_filters: int = 256,
                 primary_channels: int = 32, primary_dim: int = 8, class_dim: int = 16, **kwargs):
        super().__init__(input_shape, n_class, routings, **kwargs)
        self.conv_filters, self.primary_channels = int(conv_filters), int(primary_channels)
        self.primary_dim, self.class_dim = int(primary_dim), int(class_dim)
        self.conv = keras.layers.Conv2D(self.conv_filters, 9, activation="relu", name="conv1")
        self.primary = PrimaryCapsules(self.primary_channels, self.primary_dim, name="primary_capsules")
        self.routing = RoutingCapsules(self.n_class, self.class_dim, self.routings, name="class_capsules")
        self.build()

    def class_capsules(self, images, training=False):
        with device_scope(self.main_device):
            return self.routing(self.primary(self.conv(images)))

    def get_config(self) -> dict:
        return {**super().get_config(), "conv_filters": self.conv_filters, "primary_channels": self.primary_channels,
                "primary_dim": self.primary_dim, "class_dim": self.class_dim}


@keras.saving.register_keras_serializable(package="capsnet")
class LaneBlock(keras.layers.Layer):
    """One MLCN lane: ``[B, H, W, C]`` -> its (unsquashed) contribution to each class ``[B, K]``.

    Conv ``16·width``@9×9 valid + ``depth - 1`` convs ``16·width``@3×3 same (all ReLU) ->
    ``PrimaryCapsules(2·width, 8)`` -> ``RoutingCapsules(K, 1, routings, squash_output=False)``.
    """

    def __init__(self, lane, n_class: int, routings: int = 3, primary_dim: int = 8, **kwargs):
        super().__init__(**kwargs)
        self.lane = as_lane(lane)
        self.n_class, self.routings, self.primary_dim = int(n_class), int(routings), int(primary_dim)
        filters = 16 * self.lane.width
        self.convs = [keras.layers.Conv2D(filters, 9 if stage == 0 else 3, padding="valid" if stage == 0 else "same",
                                          activation="relu", name=f"conv{stage + 1}")
                      for stage in range(self.lane.depth)]
        self.primary = PrimaryCapsules(2 * self.lane.width, self.primary_dim, name="primary_capsules")
        self.routing = RoutingCapsules(self.n_class, 1, self.routings, squash_output=False, name="routing")

    def build(self, input_shape) -> None:
        """Create every stage's weights from the image shape ``[B, H, W, C]`` (so that a loaded lane
        restores its weights before its first call)."""
        shape = tuple(input_shape)
        for conv in self.convs:
            conv.build(shape)
            shape = conv.compute_output_shape(shape)
        self.primary.build(shape)
        self.routing.build(self.primary.compute_output_shape(shape))
        self.built = True

    def call(self, images):
        features = images
        for conv in self.convs:
            features = conv(features)
        return self.routing(self.primary(features))[..., 0]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.n_class)

    def get_config(self) -> dict:
        return {**super().get_config(), "lane": self.lane.to_config(), "n_class": self.n_class,
                "routings": self.routings, "primary_dim": self.primary_dim}


@keras.saving.register_keras_serializable(package="capsnet")
class MultiLaneCapsNet(CapsuleClassifier):
    """MLCN: ``L`` lanes, each pinned to ``placement[l]``, assembled into ``K`` class capsules of ``L`` dims.

    ``placement``: lane index -> device (mapping or one device per lane; ``None`` = no pinning,
    TensorFlow places everything). Devices must exist on this host (``capsnet.devices``); use
    ``capsnet.placement.place`` to compute one. ``lane_dropout`` drops whole lanes (dimensions of
    every class capsule) in training, rescaling the kept ones by ``1 / (1 - rate)``.
    """

    def __init__(self, input_shape: Sequence[int], n_class: int, lanes: Sequence, routings: int = 3,
                 placement: Mapping[int, str] | Sequence[str] | None = None, lane_dropout: float = 0.0, **kwargs):
        super().__init__(input_shape, n_class, routings, **kwargs)
        self.lanes = [as_lane(lane) for lane in lanes]
        if not self.lanes:
            raise ValueError("an MLCN needs at least one lane")
        if not 0.0 <= lane_dropout < 1.0:
            raise ValueError(f"lane_dropout must be in [0, 1), got {lane_dropout}")
        self.placement = _checked_placement(placement, len(self.lanes))
        self.lane_dropout = float(lane_dropout)
        self.lane_blocks = [LaneBlock(lane, self.n_class, self.routings, name=f"lane{index}")
                            for index, lane in enumerate(self.lanes)]
        self.drop_lanes = keras.layers.Dropout(self.lane_dropout, noise_shape=(None, 1, len(self.lanes)),
                                               name="lane_dropout")
        self.build()

    def lane_device(self, index: int) -> str | None:
        return self.placement[index] if self.placement else None

    def lane_outputs(self, images) -> tf.Tensor:
        """Every lane's contribution, each on its device: ``[B, H, W, C]`` -> ``[B, K, L]``."""
        contributions = []
        for index, block in enumerate(self.lane_blocks):
            with device_scope(self.lane_device(index)):
                contributions.append(block(images))
        with device_scope(self.main_device):
            return tf.stack(contributions, axis=-1)

    def class_capsules(self, images, training=False):
        assembled = self.lane_outputs(images)  # [B, K, L]
        with device_scope(self.main_device):
            return squash(self.drop_lanes(assembled, training=training))

    def get_config(self) -> dict:
        return {**super().get_config(), "lanes": [lane.to_config() for lane in self.lanes],
                "placement": [self.placement[i] for i in range(len(self.lanes))] if self.placement else None,
                "lane_dropout": self.lane_dropout}

    @classmethod
    def from_config(cls, config: dict):
        override = _placement_override.get()
        if override is not None:
            placement, main_device = override
            config = {**config, "placement": placement,
                      "main_device": main_device if main_device is not None else config.get("main_device")}
        return cls(**config)


def build_capsnet(input_shape: Sequence[int], n_class: int, routings: int = 3, **kwargs) -> CapsNet:
    """Sabour et al.'s CapsNet for ``input_shape`` images and ``n_class`` classes (see ``CapsNet``)."""
    return CapsNet(input_shape, n_class, routings, **kwargs)


def build_mlcn(input_shape: Sequence[int], n_class: int, lanes: Sequence, lane_dropout: float = 0.0,
               routings: int = 3, placement: Mapping[int, str] | Sequence[str] | None = None,
               **kwargs) -> MultiLaneCapsNet:
    """An MLCN with ``lanes`` (``Lane(width, depth)``, ``(w, d)`` or ``"WxD"``; may differ) placed by ``placement``."""
    return MultiLaneCapsNet(input_shape, n_class, lanes, routings, placement, lane_dropout, **kwargs)


def load_model(path, placement: Mapping[int, str] | Sequence[str] | None = None,
               main_device: str | None = None) -> CapsuleClassifier:
    """Load a saved CapsNet/MLCN; ``placement``/``main_device`` replace the saved ones (e.g. other devices)."""
    token = _placement_override.set((placement, main_device) if placement is not None or main_device else None)
    try:
        return keras.saving.load_model(path)
    finally:
        _placement_override.reset(token)


def _checked_placement(placement, n_lanes: int) -> dict[int, str] | None:
    """``None`` or one existing device per lane -> ``{lane: canonical device}``; anything else raises."""
    if placement is None:
        return None
    if isinstance(placement, Mapping):
        by_lane = {int(lane): device for lane, device in placement.items()}
        if sorted(by_lane) != list(range(n_lanes)):
            raise ValueError(f"placement must name a device for each lane 0..{n_lanes - 1}, got lanes {sorted(by_lane)}")
        devices = [by_lane[lane] for lane in range(n_lanes)]
    else:
        devices = list(placement)
        if len(devices) != n_lanes:
            raise ValueError(f"placement has {len(devices)} devices for {n_lanes} lanes")
    distinct = list(dict.fromkeys(devices))
    canonical = dict(zip(distinct, resolve_devices(distinct)))
    return {lane: canonical[device] for lane, device in enumerate(devices)}


def colocated_gradients(tape: tf.GradientTape, loss, variables) -> list:
    """``d loss / d variables`` with each gradient op on its forward op's device.

    Inside a graph (``fit``'s traced step) this is ``tf.gradients``, which colocates gradients with
    their ops; ``GradientTape`` there leaves backward ops without a device, so a lane's backward
    pass would run on the default device. Eagerly (``run_eagerly=True``) the tape is used.
    """
    if tf.executing_eagerly():
        return tape.gradient(loss, variables)
    return tf.gradients(loss, [variable.value for variable in variables])


def _weighted_mean(values, sample_weight) -> tf.Tensor:
    if sample_weight is None:
        return tf.reduce_mean(values)
    weights = tf.cast(tf.reshape(sample_weight, (-1,)), values.dtype)
    return tf.reduce_sum(values * weights) / tf.maximum(tf.reduce_sum(weights), 1e-12)
