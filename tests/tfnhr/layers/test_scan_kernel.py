"""The compiled MDLSTM scan (tfnhr.ops.scan_kernel) against the TensorFlow-ops scan, and how it
is built, chosen and left out of exports.

The layer-level references (a NumPy loop, finite differences, packed == padded == one at a
time) run on the compiled kernel too: see test_mdlstm.py, parametrized over both kernels.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.ragged import ragged_stack
from tfnhr.layers import mdlstm as mdlstm_module
from tfnhr.layers.mdlstm import MDLSTM2D
from tfnhr.layers.mdlstm_cells import CELL_TYPES
from tfnhr.layers.mdlstm_scan import MDLSTMParams, mdlstm_dense
from tfnhr.ops import scan_kernel


def _params(rng, cell, directions, channels, units, dtype):
    gates = 5 * units
    shapes = [(directions, channels, gates), (directions, gates), (directions, 2 * units, gates),
              (directions, 2 * units, cell.peephole_gates * units),
              (directions, units, cell.output_gates * units)]
    return MDLSTMParams(*(tf.constant(rng.normal(size=shape) * 0.6, dtype) for shape in shapes))


def _value_and_gradients(kernel, x, mask, params, cell, in_loop, probe):
    with tf.GradientTape() as tape:
        tape.watch([x, *params])
        out = mdlstm_dense(x, mask, params, cell, in_loop, False, kernel=kernel)
        loss = tf.reduce_sum(out * probe)
    return [out, *tape.gradient(loss, [x, *params])]


@pytest.mark.parametrize("cell_name", sorted(CELL_TYPES))
@pytest.mark.parametrize("in_loop", [True, False])
@pytest.mark.parametrize("directions,units", [(1, 2), (2, 9), (4, 3)])
def test_compiled_scan_equals_ops_scan_values_and_gradients(cell_name, in_loop, directions, units):
    """float64, invalid cells inside the images: outputs and the gradients w.r.t. the input
    and all five weight tensors agree to rounding."""
    cell = CELL_TYPES[cell_name]
    rng = np.random.default_rng(units * 10 + directions)
    x = tf.constant(rng.normal(size=(3, 4, 6, 5)), tf.float64)
    mask = tf.constant(rng.random((3, 4, 6)) > 0.25, tf.float64)
    params = _params(rng, cell, directions, 5, units, tf.float64)
    probe = tf.constant(rng.normal(size=(3, 4, 6, directions * units)), tf.float64)
    ops = _value_and_gradients("ops", x, mask, params, cell, in_loop, probe)
    compiled = _value_and_gradients("compiled", x, mask, params, cell, in_loop, probe)
    for reference, value in zip(ops, compiled):
        assert float(tf.reduce_max(tf.abs(reference))) > 0.0
        np.testing.assert_allclose(value.numpy(), reference.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("cell_name", sorted(CELL_TYPES))
def test_compiled_scan_masks_columns_and_images_without_valid_cells(cell_name):
    """Skewed columns that hold no valid cell in any example (the first image's invalid left and
    right edges; the second image has no valid cell at all): the compiled scan agrees with the
    TensorFlow-ops scan, and the empty image's output is zero."""
    cell = CELL_TYPES[cell_name]
    rng = np.random.default_rng(7)
    x = tf.constant(rng.normal(size=(2, 4, 7, 3)), tf.float64)
    edges = np.ones((4, 7), bool)
    edges[:, :2] = edges[:, -1] = False  # in every direction the first skewed column is empty
    mask = tf.constant(np.stack([edges, np.zeros((4, 7), bool)]), tf.float64)
    params = _params(rng, cell, 4, 3, 3, tf.float64)
    probe = tf.constant(rng.normal(size=(2, 4, 7, 12)), tf.float64)
    ops = _value_and_gradients("ops", x, mask, params, cell, True, probe)
    compiled = _value_and_gradients("compiled", x, mask, params, cell, True, probe)
    assert float(tf.reduce_max(tf.abs(compiled[0][1]))) == 0.0  # the all-invalid example
    for reference, value in zip(ops, compiled):
        np.testing.assert_allclose(value.numpy(), reference.numpy(), rtol=1e-10, atol=1e-12)


def test_layer_kernels_agree_on_a_packed_ragged_batch_in_float32():
    rng = np.random.default_rng(3)
    images = ragged_stack([rng.normal(size=(h, w, 2)).astype(np.float32) for h, w in [(3, 7), (5, 2), (1, 9), (4, 4)]])
    results = []
    for kernel in ("compiled", "ops"):
        layer = MDLSTM2D(4, scan_kernel=kernel, jit_compile=False, name=f"mdlstm_{kernel}")
        layer.build((None, None, None, 2))
        rng = np.random.default_rng(0)
        for variable in layer.weights:
            variable.assign(rng.normal(size=variable.shape) * 0.5)
        with tf.GradientTape() as tape:
            tape.watch(images.flat_values)
            out = layer(images)
            loss = tf.reduce_sum(out.flat_values ** 2)
        results.append([out.flat_values, *tape.gradient(loss, [images.flat_values, *layer.weights])])
    for value, reference in zip(*results):
        np.testing.assert_allclose(value.numpy(), reference.numpy(), rtol=1e-4, atol=1e-5)


def test_auto_picks_the_compiled_kernel_on_a_cpu_host():
    assert not tf.config.list_physical_devices("GPU")
    assert MDLSTM2D(2).scan_kernel_mode() == "compiled"
    assert MDLSTM2D(2, scan_kernel="ops").scan_kernel_mode() == "ops"
    assert MDLSTM2D(2, scan_kernel="ops").supports_jit
    assert not MDLSTM2D(2).supports_jit  # Keras must not wrap the C++ ops in XLA


def test_auto_falls_back_to_ops_with_one_warning(monkeypatch):
    monkeypatch.setattr(mdlstm_module, "unavailable_reason", lambda: "no C++ compiler 'x' on PATH")
    mdlstm_module._auto_scan_kernel.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert MDLSTM2D(2).scan_kernel_mode() == "ops"
            assert MDLSTM2D(3).scan_kernel_mode() == "ops"
        messages = [str(w.message) for w in caught]
        assert messages == ["MDLSTM2D uses the slower TensorFlow-ops scan: no C++ compiler 'x' on PATH"]
    finally:
        mdlstm_module._auto_scan_kernel.cache_clear()


def test_build_without_compiler_is_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TFNHR_KERNEL_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", "no-such-compiler-tfnhr")
    with pytest.raises(scan_kernel.KernelUnavailable, match=r"^no C\+\+ compiler 'no-such-compiler-tfnhr'"):
        scan_kernel.build(verbose=False)
    assert not any(tmp_path.iterdir())


def test_failed_compilation_names_the_first_error_and_leaves_no_file(monkeypatch, tmp_path):
    broken = tmp_path / "broken.cc"
    broken.write_text("int main() { return undefined_name; }\n")
    monkeypatch.setattr(scan_kernel, "SOURCE", broken)
    monkeypatch.setenv("TFNHR_KERNEL_DIR", str(tmp_path / "cache"))
    with pytest.raises(scan_kernel.KernelUnavailable) as raised:
        scan_kernel.build(verbose=False)
    message = str(raised.value)
    assert message.startswith("compiling broken.cc failed:") and "undefined_name" in message
    assert "\n" not in message
    assert list((tmp_path / "cache").iterdir()) == []


def test_library_name_follows_source_and_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("TFNHR_KERNEL_DIR", str(tmp_path))
    first = scan_kernel.library_path()
    assert first.parent == tmp_path and first.name.startswith("mdlstm_scan-")
    changed = tmp_path / "changed.cc"
    changed.write_bytes(scan_kernel.SOURCE.read_bytes() + b"\n// changed\n")
    monkeypatch.setattr(scan_kernel, "SOURCE", changed)
    assert scan_kernel.library_path() != first


def test_environment_decides_auto_for_the_process(monkeypatch):
    try:
        for chosen in ("ops", "compiled"):
            monkeypatch.setenv("TFNHR_SCAN_KERNEL", chosen)
            mdlstm_module._auto_scan_kernel.cache_clear()
            assert MDLSTM2D(2).scan_kernel_mode() == chosen
            assert MDLSTM2D(2, scan_kernel="ops").scan_kernel_mode() == "ops"  # explicit wins
        monkeypatch.setenv("TFNHR_SCAN_KERNEL", "fast")
        mdlstm_module._auto_scan_kernel.cache_clear()
        with pytest.raises(ValueError, match="TFNHR_SCAN_KERNEL must be 'compiled' or 'ops', not 'fast'"):
            MDLSTM2D(2).scan_kernel_mode()
    finally:
        mdlstm_module._auto_scan_kernel.cache_clear()


def test_gemm_library_follows_environment_then_the_wheel(monkeypatch):
    monkeypatch.delenv(scan_kernel.GEMM_ENV, raising=False)
    assert scan_kernel.gemm_library() == "openblas"  # the pinned wheel is installed
    monkeypatch.setattr(scan_kernel.importlib.util, "find_spec", lambda name: None)
    assert scan_kernel.gemm_library() == "eigen"
    monkeypatch.setenv(scan_kernel.GEMM_ENV, " OpenBLAS ")
    assert scan_kernel.gemm_library() == "openblas"
    monkeypatch.setenv(scan_kernel.GEMM_ENV, "mkl")
    with pytest.raises(ValueError, match="^TFNHR_KERNEL_GEMM must be 'openblas' or 'eigen', not 'mkl'$"):
        scan_kernel.gemm_library()
    with pytest.raises(ValueError, match="come from 'openblas' or 'eigen', not 'mkl'$"):
        scan_kernel.build(verbose=False, library="mkl")


def test_openblas_without_its_wheel_is_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TFNHR_KERNEL_DIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "scipy_openblas32", None)  # import fails
    with pytest.raises(scan_kernel.KernelUnavailable,
                       match=r"^TFNHR_KERNEL_GEMM=openblas needs the scipy-openblas32 wheel"):
        scan_kernel.build(verbose=False, library="openblas")
    assert not any(tmp_path.iterdir())


def test_library_name_follows_the_matrix_product_library(monkeypatch, tmp_path):
    monkeypatch.setenv("TFNHR_KERNEL_DIR", str(tmp_path))
    eigen, openblas = scan_kernel.library_path("eigen"), scan_kernel.library_path("openblas")
    assert eigen.name.startswith("mdlstm_scan-eigen-") and openblas.name.startswith("mdlstm_scan-openblas-")
    monkeypatch.setenv(scan_kernel.GEMM_ENV, "eigen")
    assert scan_kernel.library_path() == eigen


_EIGEN_CHILD = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from tests.tfnhr.layers.test_scan_kernel import _reference_problem
from tfnhr.ops import scan_kernel
assert scan_kernel.gemm_library() == "eigen"
np.savez(sys.argv[1], *[v.numpy() for v in _reference_problem("compiled")])
"""


def _reference_problem(kernel):
    """Outputs and all gradients of float64 scans of every cell type (each calls its own
    products), 4 directions, in-loop and precomputed input projections."""
    results = []
    for index, cell_name in enumerate(sorted(CELL_TYPES)):
        cell = CELL_TYPES[cell_name]
        rng = np.random.default_rng(7 + index)
        x = tf.constant(rng.normal(size=(2, 5, 7, 4)), tf.float64)
        mask = tf.constant(rng.random((2, 5, 7)) > 0.2, tf.float64)
        params = _params(rng, cell, 4, 4, 6, tf.float64)
        probe = tf.constant(rng.normal(size=(2, 5, 7, 24)), tf.float64)
        for in_loop in (True, False):
            results += _value_and_gradients(kernel, x, mask, params, cell, in_loop, probe)
    return results


@pytest.mark.slow
@pytest.mark.subprocess
def test_eigen_build_equals_openblas_build(tmp_path):
    """The kernel built with Eigen's products (another process: both builds register the same
    ops) gives the outputs and gradients of the OpenBLAS build loaded here."""
    assert scan_kernel.gemm_library() == "openblas"
    saved = tmp_path / "eigen.npz"
    env = {**os.environ, scan_kernel.GEMM_ENV: "eigen", "TF_CPP_MIN_LOG_LEVEL": "3"}
    repo = str(Path(__file__).resolve().parents[3])
    subprocess.run([sys.executable, "-c", _EIGEN_CHILD, str(saved), repo], env=env, check=True, timeout=600)
    openblas = _reference_problem("compiled")
    with np.load(saved) as eigen:
        assert len(eigen.files) == len(openblas)
        for index, value in enumerate(openblas):
            assert float(tf.reduce_max(tf.abs(value))) > 0.0
            np.testing.assert_allclose(eigen[f"arr_{index}"], value.numpy(), rtol=1e-10, atol=1e-12)


def test_compiled_scan_of_zero_rows_is_empty(capfd):
    """Columns of N = 0 rows (matrix products with a dimension of 0): empty outputs and zero
    weight gradients, nothing printed by the BLAS's argument checks."""
    ops = scan_kernel.scan_ops()
    units, directions, kx, steps = 3, 2, 4, 5
    k = kx + 4 * units
    xin, mask = tf.zeros((steps, directions, kx, 0)), tf.zeros((steps, directions, 1, 0))
    up = tf.zeros((0,))
    w_top, w_bot = tf.ones((directions, 2 * units, k)), tf.ones((directions, 3 * units, k - 2 * units))
    vo = tf.ones((directions, 2 * units, units))
    h, s, acts = ops.tfnhr_mdlstm_scan_forward(xin, mask, up, w_top, w_bot, vo, cell="leaky_lp", in_loop=True)
    assert h.shape == (steps, directions, units, 0) and acts.shape == (steps, directions, 7 * units, 0)
    grads = ops.tfnhr_mdlstm_scan_backward(h, xin, mask, up, w_top, w_bot, vo, h, s, acts,
                                           cell="leaky_lp", in_loop=True)
    assert grads[0].shape == xin.shape
    for grad, weight in zip(grads[1:], (vo, w_top, w_bot)):
        assert grad.shape == weight.shape and not np.any(grad.numpy())
    printed = capfd.readouterr()
    assert "parameter" not in printed.out + printed.err
