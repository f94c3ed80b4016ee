"""``MDLSTM2D``: multi-directional 2-D MDLSTM layer (Leaky LP, Leaky LP new-state or LSTM cells).

Input and output::

    dense  [B, H, W, C] (+ mask [B, H, W], bool)  ->  [B, H, W, units * directions]
    ragged [B, (H), (W), C]                        ->  ragged [B, (H), (W), units * directions]

* The mask is passed as ``layer(x, mask=m)`` (or arrives as the Keras mask of ``x``).  Cells
  where it is False are invalid: their hidden and memory states are zero, their outputs are
  zero and nothing flows through them, exactly as at the border of the image.  The layer
  propagates the same mask to its output (so stacked ``MDLSTM2D`` layers keep it).
* Ragged input is laid out either by example packing (``packing="examples"``: examples tiled
  into canvases with invalid separator cells, :mod:`tfnhr.ops.packing`) or by padding to the
  batch's largest height and width (``packing="pad"``); both give the same numbers as running
  every example alone.
* Output channels: ``units`` per direction, concatenated in direction order 0: scan from the
  top-left corner, 1: from the top-right (input flipped along W), 2: from the bottom-left
  (flipped along H), 3: from the bottom-right; ``directions=2`` uses 0 and 1.  Every direction
  has its own weights and its output is flipped back to the input orientation.

Cell equations and gate inputs: :mod:`tfnhr.layers.mdlstm_cells`; the skewed-grid computation:
:mod:`tfnhr.layers.mdlstm_scan`.

Weights (leading axis = direction; ``G = 5 units`` core gate columns in the cell's gate order):
``kernel [D, C, G]`` (W), ``recurrent_kernel [D, 2u, G]`` (rows ``h1`` then ``h2``),
``peephole_kernel [D, 2u, P]`` (rows ``s1`` then ``s2``, for the first ``P / u`` gates),
``output_peephole_kernel [D, u, Q]`` (the memory seen by the ``Q / u`` output gates),
``bias [D, G]``.  :meth:`MDLSTM2D.gate_weights` returns them per gate by name.

Initialisation: every matrix block feeding one gate is Glorot-uniform for its own fan-in and
fan-out (``W``: ``C -> u``; ``U``, ``V``, ``Vo``: ``u -> u``); all biases start at zero, which
gives the Leaky LP lambda gate 0.5 (an equal mix of both predecessors' memories) and the LSTM
forget gates ``f1 + f2 ~ 1`` (a forget bias of 1 per gate, the 1-D habit, would make the sum
~1.46 and grow the LSTM state geometrically along the scan diagonal from the first step).

Precision: weights and the recurrence are computed in the layer's variable dtype (float32, or
float64 for ``dtype="float64"``); under a mixed-precision policy the inputs are cast up and the
output cast to the compute dtype.

Errors: ``ValueError`` for wrong rank, a channel count other than the one the layer was built
for, an empty batch or a zero-size image, wherever those sizes are known (always in eager mode;
inside ``tf.function`` for static dimensions).  Sizes that are only known when a graph runs
cannot raise a Python ``ValueError``; the packing planner then raises a TensorFlow error.

Speed (benchmarks/mdlstm_speed.py, one CPU thread): by default (``scan_kernel="auto"``) the
loop over skewed columns runs as two compiled C++ ops, forward and backward
(:mod:`tfnhr.ops.scan_kernel`), on CPU-only hosts where the kernel builds; otherwise it is a
``tf.while_loop`` of TensorFlow ops, compiled with XLA (``jit_compile``) for dense input
(1.1-1.8x faster than without, at 1-5 s of compilation per new input shape) and not for ragged
input (whose packed canvases change shape from batch to batch).  Two process settings, which
have to be in the environment before TensorFlow starts, speed it up further:
``TF_CPU_ALLOCATOR_USE_BFC=true``
(keeps large blocks instead of page-faulting them in again every step) and
``XLA_FLAGS=--xla_cpu_use_thunk_runtime=false``.
"""

from __future__ import annotations

import functools
import math
import os
import warnings

import keras
import numpy as np
import tensorflow as tf

from tfnhr.config.choices import CELLS, PACKING_MODES
from tfnhr.layers.mdlstm_cells import CELL_TYPES
from tfnhr.layers.mdlstm_scan import MDLSTMParams, mdlstm_dense, mdlstm_dense_memory
from tfnhr.ops.packing import PLANNERS, image_sizes_tensor, pack_ragged_graph, pad_batch, unpack, unpad_batch
from tfnhr.ops.scan_kernel import scan_ops, unavailable_reason

INPUT_PROJECTIONS = ("auto", "precompute", "in_loop")
SCAN_KERNELS = ("auto", "compiled", "ops")
"""``scan_kernel`` choices: the compiled C++ scan, the TensorFlow-ops scan, or ``"auto"``."""
IN_LOOP_MAX_CHANNELS = 32
"""Without XLA, ``input_projection="auto"`` feeds the raw input into the loop when ``C_in`` is
at most this, and precomputes the input projection otherwise; under XLA it always feeds the
raw input (measured with benchmarks/mdlstm_speed.py and the same layer at C_in 32, 64, 128:
with XLA the in-loop variant was faster for every C_in measured, 4 to 128; without XLA the
precomputed projection was as fast or faster from C_in = 64 on)."""


SCAN_KERNEL_ENV = "TFNHR_SCAN_KERNEL"
"""Environment variable that decides ``scan_kernel="auto"`` for a whole process (and its Horovod
workers): ``compiled`` or ``ops``."""


@functools.cache
def _auto_scan_kernel() -> str:
    """``scan_kernel="auto"`` in this process: ``$TFNHR_SCAN_KERNEL`` if set, else
    ``"compiled"``, or ``"ops"`` when a GPU is visible or the kernel cannot be built (then with
    one warning per process)."""
    chosen = os.environ.get(SCAN_KERNEL_ENV)
    if chosen:
        if chosen not in ("compiled", "ops"):
            raise ValueError(f"{SCAN_KERNEL_ENV} must be 'compiled' or 'ops', not {chosen!r}")
        if chosen == "compiled":
            scan_ops()
        return chosen
    if tf.config.list_physical_devices("GPU"):
        return "ops"
    reason = unavailable_reason()
    if reason is not None:
        warnings.warn(f"MDLSTM2D uses the slower TensorFlow-ops scan: {reason}", stacklevel=3)
        return "ops"
    return "compiled"


@keras.saving.register_keras_serializable(package="tfnhr")
class MDLSTM2D(keras.layers.Layer):
    """Multi-directional 2-D MDLSTM (see the module docstring for shapes and semantics).

    Args:
      units: hidden units per direction.
      cell: ``"leaky_lp"`` (default), ``"leaky_lp_new_state"`` or ``"lstm"``.
      directions: 1, 2 or 4.
      packing: how ragged input is laid out: ``"examples"`` (packing) or ``"pad"``.
      dropout: dropout rate on the outputs, applied in training only.
      input_projection: ``"precompute"`` (``x @ W`` for all cells before the loop),
        ``"in_loop"`` (raw input enters the loop's matmul) or ``"auto"`` (``in_loop`` under
        XLA, else for ``C_in <= IN_LOOP_MAX_CHANNELS``).
      jit_compile: compile the dense computation of the TensorFlow-ops scan with XLA
        (``True``/``False``); ``"auto"`` uses XLA for dense input and not for ragged input
        (whose canvas sizes change from batch to batch, and every new size costs an XLA
        compilation).  Use ``False`` for dense batches of many different shapes.  ``True``
        always runs the TensorFlow-ops scan (XLA cannot compile the C++ ops).
      scan_kernel: ``"compiled"``: the loop over columns as two C++ ops
        (:mod:`tfnhr.ops.scan_kernel`, CPU only; ``KernelUnavailable`` if it cannot be built);
        ``"ops"``: a ``tf.while_loop`` of TensorFlow ops (any device, XLA, exportable without
        the kernel library: ``tfnhr export`` sets it); ``"auto"`` (default): what the
        environment variable ``TFNHR_SCAN_KERNEL`` says (``compiled`` or ``ops``) if set, else
        ``"compiled"`` on hosts without a visible GPU where the kernel builds, else ``"ops"``
        (with a warning when the kernel does not build).  Both give the same numbers (to
        rounding).
      packing_max_width: row width for example packing (``plan_packing``'s ``max_width``;
        ``None``: the widest example of the batch).
      packing_height_step: ``plan_packing``'s ``height_step``: packing rows bucket examples by
        height rounded up to this multiple (``1``: exact heights, as in Wenniger et al. 2019). Larger steps
        give fewer, fuller rows for words of varied heights, at the cost of invalid cells under
        the shorter examples of a row; the outputs are the same either way.
      packing_planner: where ragged batches are planned (``tfnhr.ops.packing.PLANNERS``):
        ``"xla"`` (default) TensorFlow ops compiled with XLA, ``"graph"`` the same ops without
        XLA (set by ``tfnhr export`` for portable SavedModels), ``"numpy"`` the Python reference
        planner in ``tf.numpy_function``. All three give the same layout, hence the same outputs.
      **kwargs: Keras layer arguments (``name``, ``dtype``, ...).
    """

    def __init__(
        self,
        units: int,
        cell: str = "leaky_lp",
        directions: int = 4,
        packing: str = "examples",
        dropout: float = 0.0,
        input_projection: str = "auto",
        jit_compile: bool | str = "auto",
        packing_max_width: int | None = None,
        packing_height_step: int = 1,
        packing_planner: str = "xla",
        scan_kernel: str = "auto",
        **kwargs,
    ):
        kwargs.pop("autocast", None)
        super().__init__(autocast=False, **kwargs)
        if int(units) != units or units < 1:
            raise ValueError(f"units must be a positive integer, got {units!r}")
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {sorted(CELLS)}, got {cell!r}")
        if directions not in (1, 2, 4):
            raise ValueError(f"directions must be 1, 2 or 4, got {directions!r}")
        if packing not in PACKING_MODES:
            raise ValueError(f"packing must be one of {PACKING_MODES}, got {packing!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if input_projection not in INPUT_PROJECTIONS:
            raise ValueError(
                f"input_projection must be one of {INPUT_PROJECTIONS}, got {input_projection!r}"
            )
        if jit_compile not in (True, False, "auto"):
            raise ValueError(f"jit_compile must be True, False or 'auto', got {jit_compile!r}")
        if scan_kernel not in SCAN_KERNELS:
            raise ValueError(f"scan_kernel must be one of {SCAN_KERNELS}, got {scan_kernel!r}")
        if scan_kernel == "compiled" and jit_compile is True:
            raise ValueError("scan_kernel='compiled' cannot run under XLA: use jit_compile=False "
                             "or 'auto', or scan_kernel='ops'")
        if packing_max_width is not None and (
            int(packing_max_width) != packing_max_width or packing_max_width < 1
        ):
            raise ValueError(
                f"packing_max_width must be a positive int or None, got {packing_max_width!r}"
            )
        if (isinstance(packing_height_step, bool) or int(packing_height_step) != packing_height_step
                or packing_height_step < 1):
            raise ValueError(
                f"packing_height_step must be a positive int, got {packing_height_step!r}"
            )
        self.units = int(units)
        self.cell = cell
        self.directions = directions
        self.packing = packing
        self.dropout = float(dropout)
        self.input_projection = input_projection
        self.jit_compile = jit_compile
        self.packing_max_width = packing_max_width
        self.packing_height_step = int(packing_height_step)
        if packing_planner not in PLANNERS:
            raise ValueError(f"packing_planner must be one of {PLANNERS}, got {packing_planner!r}")
        self.packing_planner = packing_planner
        self.scan_kernel = scan_kernel
        # Keras must not compile a whole training step with XLA around the C++ scan.
        self.supports_jit = scan_kernel == "ops"
        self.supports_masking = True
        self._cell = CELL_TYPES[cell]
        self._seed_generator = keras.random.SeedGenerator() if dropout else None

    # ------------------------------------------------------------------ weights

    def build(self, input_shape) -> None:
        channels = input_shape[-1]
        if len(input_shape) != 4 or channels is None:
            raise ValueError(
                f"MDLSTM2D expects [B, H, W, C] input with a known C, got shape {input_shape}"
            )
        d, u, cell = self.directions, self.units, self._cell
        g = len(cell.gates) * u

        def weight(name: str, shape: tuple, fan_in: int | None):
            if fan_in is None:
                initializer = "zeros"
            else:
                limit = math.sqrt(6.0 / (fan_in + u))
                initializer = keras.initializers.RandomUniform(-limit, limit)
            # No autocast: the recurrence runs in the variable dtype under mixed precision too.
            return self.add_weight(name=name, shape=shape, initializer=initializer, autocast=False)

        self.kernel = weight("kernel", (d, channels, g), channels)
        self.recurrent_kernel = weight("recurrent_kernel", (d, 2 * u, g), u)
        self.peephole_kernel = weight("peephole_kernel", (d, 2 * u, cell.peephole_gates * u), u)
        self.output_peephole_kernel = weight(
            "output_peephole_kernel", (d, u, cell.output_gates * u), u
        )
        self.bias = weight("bias", (d, g), None)
        self._channels = channels
        self._dense_fns = {
            (kernel, jit): tf.function(
                functools.partial(
                    mdlstm_dense, cell=cell, in_loop=self.input_projection_mode(jit) == "in_loop",
                    stack_residuals=jit, kernel=kernel,
                ),
                jit_compile=jit, reduce_retracing=True,
            )
            for kernel, jit in (("ops", False), ("ops", True), ("compiled", False))
        }
        self._memory_fn = tf.function(
            functools.partial(mdlstm_dense_memory, cell=cell), reduce_retracing=True
        )

    def scan_kernel_mode(self) -> str:
        """The scan used without XLA: ``"compiled"`` or ``"ops"`` (``"auto"`` resolved).

        Raises:
          KernelUnavailable: ``scan_kernel="compiled"`` and the kernel cannot be built here.
        """
        if self.scan_kernel == "compiled":
            scan_ops()
            return "compiled"
        return "ops" if self.scan_kernel == "ops" else _auto_scan_kernel()

    def input_projection_mode(self, jit: bool) -> str:
        """The input projection used with or without XLA: ``"in_loop"`` or ``"precompute"``
        (``"auto"`` resolved; needs a built layer)."""
        if self.input_projection != "auto":
            return self.input_projection
        return "in_loop" if jit or self._channels <= IN_LOOP_MAX_CHANNELS else "precompute"

    def gate_weights(self, direction: int) -> dict[str, dict[str, np.ndarray]]:
        """The weights of one direction by gate name (``self.cell``'s gates, see
        :mod:`tfnhr.layers.mdlstm_cells`), as NumPy arrays.

        Returns:
          ``{gate: {"W": [C, u], "U1": [u, u], "U2": [u, u], "b": [u]}}``; peephole gates also
          have ``"V1"``, ``"V2"`` ``[u, u]`` (on ``s1``, ``s2``), output gates ``"Vo"`` ``[u, u]``
          (on the memory they see).  The cell computes ``x @ W + h1 @ U1 + ...``.
        """
        if not 0 <= direction < self.directions:
            raise ValueError(f"direction must be in [0, {self.directions}), got {direction}")
        u, cell = self.units, self._cell
        kernel = keras.ops.convert_to_numpy(self.kernel)[direction]
        recurrent = keras.ops.convert_to_numpy(self.recurrent_kernel)[direction]
        peephole = keras.ops.convert_to_numpy(self.peephole_kernel)[direction]
        output = keras.ops.convert_to_numpy(self.output_peephole_kernel)[direction]
        bias = keras.ops.convert_to_numpy(self.bias)[direction]
        first_output = len(cell.gates) - cell.output_gates
        weights = {}
        for k, gate in enumerate(cell.gates):
            cols = slice(k * u, (k + 1) * u)
            w = {"W": kernel[:, cols], "U1": recurrent[:u, cols], "U2": recurrent[u:, cols],
                 "b": bias[cols]}
            if k < cell.peephole_gates:
                w["V1"], w["V2"] = peephole[:u, cols], peephole[u:, cols]
            if k >= first_output:
                w["Vo"] = output[:, (k - first_output) * u:(k - first_output + 1) * u]
            weights[gate] = w
        return weights

    def _params(self) -> MDLSTMParams:
        return MDLSTMParams(
            *(tf.convert_to_tensor(v) for v in (
                self.kernel, self.bias, self.recurrent_kernel, self.peephole_kernel,
                self.output_peephole_kernel,
            ))
        )

    # ------------------------------------------------------------------ call

    def call(self, inputs, mask=None, training=None):
        if isinstance(inputs, tf.RaggedTensor):
            return self._call_ragged(inputs, mask, training)
        x, valid = self._check_dense(inputs, mask)
        kernel = "ops" if self.jit_compile is True else self.scan_kernel_mode()
        return self._run(x, valid, training, kernel, jit=kernel == "ops" and bool(self.jit_compile))

    def _call_ragged(self, images: tf.RaggedTensor, mask, training) -> tf.RaggedTensor:
        """Ragged ``[B, (H), (W), C]`` -> ragged ``[B, (H), (W), D * u]``, via a packed or padded
        dense batch whose separator / padding cells are invalid."""
        if mask is not None:
            raise ValueError("MDLSTM2D takes no mask with ragged input (every pixel is valid)")
        self._check_shape(images.shape)
        sizes = image_sizes_tensor(images)
        if tf.executing_eagerly() and tf.size(sizes) and tf.reduce_min(sizes) == 0:
            raise ValueError("MDLSTM2D got a zero-size example in a ragged batch")
        jit = self.jit_compile is True
        kernel = "ops" if jit else self.scan_kernel_mode()
        if self.packing == "examples":
            canvas, valid, indices = pack_ragged_graph(
                images, self.packing_max_width, height_step=self.packing_height_step,
                planner=self.packing_planner)
            return unpack(self._run(canvas, valid, training, kernel, jit), indices)
        padded, valid = pad_batch(images)
        self._check_shape(padded.shape)
        return unpad_batch(self._run(padded, valid, training, kernel, jit), sizes)

    def _run(self, x, valid, training, kernel: str, jit: bool) -> tf.Tensor:
        """The dense computation on ``x`` ``[B, H, W, C]`` with 0/1 or bool ``valid``, by the
        ``kernel`` scan, with XLA if ``jit`` (``"ops"`` only)."""
        x = tf.cast(x, self.variable_dtype)
        out = self._dense_fns[kernel, jit](x, tf.cast(valid, x.dtype), self._params())
        if training and self.dropout:
            out = keras.random.dropout(out, self.dropout, seed=self._seed_generator)
        return tf.cast(out, self.compute_dtype)

    def memory(self, inputs, mask=None) -> tf.Tensor:
        """The memory states ``s`` (dense input only; for inspection, not differentiable).

        Returns:
          ``[B, H, W, units * directions]`` in the layout of the output.
        """
        x, valid = self._check_dense(tf.convert_to_tensor(inputs), mask)
        x = tf.cast(x, self.variable_dtype)
        return self._memory_fn(x, tf.cast(valid, x.dtype), self._params())

    def _check_shape(self, shape: tf.TensorShape) -> None:
        if shape.rank != 4:
            raise ValueError(f"MDLSTM2D expects [B, H, W, C] input, got shape {shape}")
        if shape[-1] != self._channels:
            raise ValueError(
                f"MDLSTM2D was built for {self._channels} input channels, got {shape[-1]}"
            )
        if any(dim == 0 for dim in shape[:3]):
            raise ValueError(f"MDLSTM2D got an empty batch or a zero-size image: {shape}")

    def _check_dense(self, inputs, mask):
        """Validate a dense batch and its optional mask; returns both (mask all-True if None)."""
        self._check_shape(inputs.shape)
        if mask is None:
            return inputs, tf.ones(tf.shape(inputs)[:3], tf.bool)
        mask = tf.convert_to_tensor(mask)
        if mask.shape.rank != 3:
            raise ValueError(f"MDLSTM2D expects a [B, H, W] mask, got shape {mask.shape}")
        return inputs, mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units * self.directions,)

    def compute_mask(self, inputs, mask=None):
        return None if isinstance(inputs, tf.RaggedTensor) else mask

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "units": self.units,
            "cell": self.cell,
            "directions": self.directions,
            "packing": self.packing,
            "dropout": self.dropout,
            "input_projection": self.input_projection,
            "jit_compile": self.jit_compile,
            "packing_max_width": self.packing_max_width,
            "packing_height_step": self.packing_height_step,
            "packing_planner": self.packing_planner,
            "scan_kernel": self.scan_kernel,
        }
