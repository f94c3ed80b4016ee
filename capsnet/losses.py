"""CapsNet losses: the margin loss on capsule lengths and the weighted reconstruction loss."""

from __future__ import annotations

import tensorflow as tf

from capsnet.capsules import one_hot_labels

M_PLUS, M_MINUS, DOWN_WEIGHT = 0.9, 0.1, 0.5
RECONSTRUCTION_WEIGHT = 0.392  # 0.0005 × 784: Sabour's sum-of-squares weight, as a mean over MNIST pixels


def margin_loss(labels, lengths, m_plus: float = M_PLUS, m_minus: float = M_MINUS,
                down_weight: float = DOWN_WEIGHT) -> tf.Tensor:
    """Per-example margin loss ``[B]``.

    ``L = Σ_k T_k max(0, m⁺ - |v_k|)² + λ (1 - T_k) max(0, |v_k| - m⁻)²`` with ``T`` the one-hot
    label. ``labels``: int ``[B]`` or one-hot ``[B, K]``; ``lengths``: capsule lengths ``[B, K]``.
    """
    lengths = tf.convert_to_tensor(lengths)
    present = one_hot_labels(labels, lengths.shape[-1], lengths.dtype)
    per_class = (present * tf.square(tf.nn.relu(m_plus - lengths))
                 + down_weight * (1.0 - present) * tf.square(tf.nn.relu(lengths - m_minus)))
    return tf.reduce_sum(per_class, axis=-1)


def reconstruction_loss(images, reconstructions, weight: float = RECONSTRUCTION_WEIGHT) -> tf.Tensor:
    """Per-example ``weight · mean((x - x̂)²)`` over all pixels and channels: ``[B]``."""
    squared = tf.square(tf.cast(images, reconstructions.dtype) - reconstructions)
    return weight * tf.reduce_mean(tf.reshape(squared, (tf.shape(squared)[0], -1)), axis=-1)
