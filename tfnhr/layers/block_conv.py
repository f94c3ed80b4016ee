"""Block-strided convolution (kernel = stride = block) on dense and ragged image batches.

Wenniger et al. 2019, §V-B. Between MDLSTM layers, a convolution whose stride equals its kernel merges each
non-overlapping ``bh x bw`` block of pixels into one output pixel. Its blocks never straddle two
examples, so a ragged batch needs no padding to a common size: every example is chopped into its
own blocks, all blocks of all examples are stacked on one axis and multiplied with the kernel in
a single matmul, and the results are put back together per example ("chunking / de-chunking").
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from tfnhr.ops.packing import image_sizes_tensor


def _check_block(block: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(block, int) and not isinstance(block, bool):
        block = (block, block)
    if (not isinstance(block, Sequence) or len(block) != 2
            or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in block)):
        raise ValueError(f"block must be a positive int or a pair (bh, bw) of positive ints, "
                         f"got {block!r}")
    return int(block[0]), int(block[1])


@keras.saving.register_keras_serializable(package="tfnhr")
class BlockConv2D(keras.layers.Layer):
    """Convolution with kernel = stride = ``block`` and 'valid' windows, on dense or ragged input.

    Output pixel ``(i, j)`` is ``activation(sum over the block's pixels and channels of
    x[i*bh + di, j*bw + dj, c] * kernel[di, dj, c, f] + bias[f])``.

    Sizes that are not multiples of the block are zero-padded at the bottom / right **per
    example** (the last block row / column is partial), so the output is
    ``ceil(H / bh) x ceil(W / bw)`` and no pixel is dropped.

    Inputs:
      * dense ``[B, H, W, C]``, optionally with a bool ``mask`` ``[B, H, W]`` (``call`` argument
        or Keras mask propagation). Invalid pixels are read as zeros, and the output mask
        (:meth:`compute_mask`) is ``True`` where the block holds at least one valid pixel. So on
        a :func:`~tfnhr.ops.packing.pad_batch` batch (examples at the top left) the valid outputs
        equal the ragged result. Not meant for packed canvases: their examples do not start on
        block boundaries; unpack first.
      * ragged ``[B, (H), (W), C]`` -> ragged ``[B, (ceil(H/bh)), (ceil(W/bw)), filters]``, the
        same numbers as running each example alone. Every ragged pixel is valid (a mask is
        rejected). An example of size 0 gives an empty output example. The block count changes
        from batch to batch, so this path is not for XLA (``jit_compile=False``).

    Args:
      filters: output channels ``F``.
      block: ``(bh, bw)`` or one int for both: kernel size and stride, in pixels.
      activation: Keras activation (name or callable) applied to the output; ``None``: linear.
      use_bias: add a bias ``[F]``.
      kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
      kernel_constraint, bias_constraint: as in ``keras.layers.Conv2D``; kernel ``[bh, bw, C, F]``.
    """

    def __init__(
        self,
        filters: int,
        block: int | Sequence[int] = (2, 2),
        activation: str | keras.layers.Layer | None = None,
        use_bias: bool = True,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        bias_initializer: str | keras.initializers.Initializer = "zeros",
        kernel_regularizer: str | keras.regularizers.Regularizer | None = None,
        bias_regularizer: str | keras.regularizers.Regularizer | None = None,
        kernel_constraint: str | keras.constraints.Constraint | None = None,
        bias_constraint: str | keras.constraints.Constraint | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(filters, bool) or not isinstance(filters, int) or filters < 1:
            raise ValueError(f"filters must be a positive int, got {filters!r}")
        self.filters = filters
        self.block = _check_block(block)
        self.activation = keras.activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.supports_masking = True

    def _check_input_shape(self, shape: Sequence[int | None]) -> int:
        """Rank / channel checks; returns the channel count ``C``."""
        if len(shape) != 4:
            raise ValueError(f"{self.name}: expected input [B, H, W, C] (dense or ragged), "
                             f"got shape {tuple(shape)}")
        channels = shape[-1]
        if channels is None:
            raise ValueError(f"{self.name}: the channel dimension must be static, "
                             f"got {tuple(shape)}")
        if self.built and channels != self.kernel.shape[2]:
            raise ValueError(f"{self.name}: input has {channels} channels, the layer was built "
                             f"for {self.kernel.shape[2]}")
        return channels

    def build(self, input_shape: Sequence[int | None]) -> None:
        channels = self._check_input_shape(input_shape)
        self.kernel = self.add_weight(
            name="kernel", shape=(*self.block, channels, self.filters),
            initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        self.bias = self.add_weight(
            name="bias", shape=(self.filters,), initializer=self.bias_initializer,
            regularizer=self.bias_regularizer,
            constraint=self.bias_constraint) if self.use_bias else None

    def call(self, inputs: tf.Tensor | tf.RaggedTensor, mask: tf.Tensor | None = None
             ) -> tf.Tensor | tf.RaggedTensor:
        """Dense ``[B, H, W, C]`` -> ``[B, ceil(H/bh), ceil(W/bw), F]``; ragged likewise."""
        self._check_input_shape(inputs.shape)
        inputs = tf.cast(inputs, self.compute_dtype)
        if isinstance(inputs, tf.RaggedTensor):
            if mask is not None:
                raise ValueError(f"{self.name}: a mask is not supported with ragged input "
                                 "(every ragged pixel is valid)")
            return self._call_ragged(inputs)
        if mask is not None:
            inputs = inputs * tf.cast(mask, inputs.dtype)[..., tf.newaxis]
        outputs = tf.nn.conv2d(self._pad_to_blocks(inputs), tf.cast(self.kernel, inputs.dtype),
                               strides=self.block, padding="VALID")
        return self._finish(outputs)

    def _finish(self, outputs: tf.Tensor) -> tf.Tensor:
        if self.use_bias:
            outputs = outputs + tf.cast(self.bias, outputs.dtype)
        return self.activation(outputs)

    def _pad_to_blocks(self, maps: tf.Tensor) -> tf.Tensor:
        """Zero/False-pad ``[B, H, W, ...]`` at the bottom / right to multiples of the block."""
        height = maps.shape[1] if maps.shape[1] is not None else tf.shape(maps)[1]
        width = maps.shape[2] if maps.shape[2] is not None else tf.shape(maps)[2]
        paddings = [[0, 0], [0, -height % self.block[0]], [0, -width % self.block[1]]]
        return tf.pad(maps, paddings + [[0, 0]] * (maps.shape.rank - 3))

    def _call_ragged(self, inputs: tf.RaggedTensor) -> tf.RaggedTensor:
        """Chunk every example into blocks, one matmul for all blocks, de-chunk."""
        block_h, block_w = self.block
        channels = inputs.shape[-1]
        sizes = image_sizes_tensor(inputs)  # [B, 2] int64
        heights, widths = sizes[:, 0], sizes[:, 1]
        out_heights = (heights + block_h - 1) // block_h
        out_widths = (widths + block_w - 1) // block_w
        blocks_per_example = out_heights * out_widths
        pixel_starts = tf.cumsum(heights * widths, exclusive=True)
        block_starts = tf.cumsum(blocks_per_example, exclusive=True)
        # One row per output pixel (= block), example by example, row-major.
        example = tf.repeat(tf.range(tf.size(heights, out_type=tf.int64)), blocks_per_example)
        local = (tf.range(tf.reduce_sum(blocks_per_example))
                 - tf.gather(block_starts, example))
        block_row = local // tf.gather(out_widths, example)
        block_col = local % tf.gather(out_widths, example)
        # One column per pixel of the block, in kernel order (di, dj).
        offset_row = tf.repeat(tf.range(block_h, dtype=tf.int64), block_w)
        offset_col = tf.tile(tf.range(block_w, dtype=tf.int64), [block_h])
        row = block_row[:, tf.newaxis] * block_h + offset_row  # [num_blocks, bh * bw]
        col = block_col[:, tf.newaxis] * block_w + offset_col
        width = tf.gather(widths, example)[:, tf.newaxis]
        inside = (row < tf.gather(heights, example)[:, tf.newaxis]) & (col < width)
        flat = tf.reshape(inputs.flat_values, [-1, channels])
        zero_row = tf.shape(flat, out_type=tf.int64)[0]  # index of the appended zero pixel
        index = tf.where(inside, tf.gather(pixel_starts, example)[:, tf.newaxis] + row * width
                         + col, zero_row)
        padded = tf.concat([flat, tf.zeros_like(flat[:1])], axis=0)
        blocks = tf.reshape(tf.gather(padded, index), [-1, block_h * block_w * channels])
        kernel = tf.reshape(tf.cast(self.kernel, blocks.dtype), [-1, self.filters])
        outputs = self._finish(tf.matmul(blocks, kernel))
        return tf.RaggedTensor.from_nested_row_lengths(
            outputs, [out_heights, tf.repeat(out_widths, out_heights)], validate=False)

    def compute_mask(self, inputs: tf.Tensor | tf.RaggedTensor, mask: tf.Tensor | None = None
                     ) -> tf.Tensor | None:
        """Output mask ``[B, ceil(H/bh), ceil(W/bw)]``: the block holds any valid pixel."""
        if mask is None or isinstance(inputs, tf.RaggedTensor):
            return None
        padded = self._pad_to_blocks(tf.cast(mask, tf.bool))
        shape = tf.shape(padded)
        blocks = tf.reshape(padded, [shape[0], shape[1] // self.block[0], self.block[0],
                                     shape[2] // self.block[1], self.block[1]])
        return tf.reduce_any(blocks, axis=[2, 4])

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> tuple[int | None, ...]:
        """Dense ``(B, H, W, C)`` -> ``(B, ceil(H/bh), ceil(W/bw), F)``; ``None`` stays ``None``."""
        self._check_input_shape(input_shape)
        batch, height, width, _ = input_shape
        out_height = None if height is None else -(-height // self.block[0])
        out_width = None if width is None else -(-width // self.block[1])
        return batch, out_height, out_width, self.filters

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            filters=self.filters,
            block=self.block,
            activation=keras.activations.serialize(self.activation),
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            kernel_regularizer=keras.regularizers.serialize(self.kernel_regularizer),
            bias_regularizer=keras.regularizers.serialize(self.bias_regularizer),
            kernel_constraint=keras.constraints.serialize(self.kernel_constraint),
            bias_constraint=keras.constraints.serialize(self.bias_constraint),
        )
        return config
