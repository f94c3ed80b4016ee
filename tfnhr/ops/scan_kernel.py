"""The compiled MDLSTM scan (``kernels/mdlstm_scan.cc``): building, caching and loading it.

The skewed scan of :mod:`tfnhr.layers.mdlstm_scan` written as TensorFlow ops costs ~35 ops per
column forward and ~50 backward; on a CPU most of a narrow layer's time is spent dispatching
them.  The two ops in ``kernels/mdlstm_scan.cc`` run the whole loop over columns in C++
(vectorised Eigen gate arithmetic), one op forward and one backward.  Their matrix products go
to OpenBLAS, the copy the ``scipy-openblas32`` wheel ships (a pinned dependency), or to Eigen
when that wheel is missing or ``$TFNHR_KERNEL_GEMM=eigen`` asks for it (:func:`gemm_library`).

The source is compiled on first use with the TensorFlow headers of the running installation
(``-O3 -march=native``) into a cache directory, ``$TFNHR_KERNEL_DIR`` or
``~/.cache/tfnhr/kernels`` (``$XDG_CACHE_HOME`` respected); the file name carries a hash of the
source, the TensorFlow version, the compiler and link flags (the OpenBLAS wheel's location
included) and the CPU's feature flags, so a changed source, TensorFlow or machine gets its own
build.  ``scripts/setup.sh`` builds it
(``python -m tfnhr.ops.scan_kernel``), so training never waits for the compiler (about 20 s on 2
cores with OpenBLAS's products, a minute with Eigen's).  Concurrent builds (several Horovod workers) are safe: each writes a
temporary file and renames it into place.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import tensorflow as tf

SOURCE = Path(__file__).with_name("kernels") / "mdlstm_scan.cc"
"""The C++ source of the two ops."""

OPTIMIZE_FLAGS = ("-O3", "-march=native", "-shared", "-fPIC")

GEMM_ENV = "TFNHR_KERNEL_GEMM"
"""Environment variable choosing the kernel's matrix products: ``openblas`` or ``eigen``."""

GEMM_LIBRARIES = ("openblas", "eigen")


class KernelUnavailable(RuntimeError):
    """The compiled scan cannot be built or loaded here (the message says why, in one line)."""


def kernel_dir() -> Path:
    """Where built kernels are cached."""
    if os.environ.get("TFNHR_KERNEL_DIR"):
        return Path(os.environ["TFNHR_KERNEL_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "tfnhr" / "kernels"


def _compiler() -> str:
    name = os.environ.get("CXX") or "g++"
    path = shutil.which(name)
    if path is None:
        raise KernelUnavailable(f"no C++ compiler {name!r} on PATH (install g++ or set CXX)")
    return path


def _cpu_flags() -> str:
    """The CPU feature flags ``-march=native`` compiles for (Linux), else the machine name."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return line
    except OSError:
        pass
    return platform.machine()


def gemm_library() -> str:
    """The library the kernel's matrix products use in this process: ``$TFNHR_KERNEL_GEMM`` if
    set, else ``openblas`` when the ``scipy-openblas32`` wheel is installed, else ``eigen``.

    Raises:
      ValueError: ``$TFNHR_KERNEL_GEMM`` names neither.
    """
    chosen = os.environ.get(GEMM_ENV, "").strip().lower()
    if chosen and chosen not in GEMM_LIBRARIES:
        raise ValueError(f"{GEMM_ENV} must be 'openblas' or 'eigen', not {chosen!r}")
    if chosen:
        return chosen
    return "openblas" if importlib.util.find_spec("scipy_openblas32") else "eigen"


def _gemm_flags(library: str) -> tuple[list[str], list[str]]:
    """Compile and link flags for ``library``'s matrix products.

    Raises:
      KernelUnavailable: ``openblas`` asked for without the ``scipy-openblas32`` wheel.
    """
    if library not in GEMM_LIBRARIES:
        raise ValueError(f"the kernel's matrix products come from 'openblas' or 'eigen', not {library!r}")
    if library == "eigen":
        return ["-DTFNHR_EIGEN_GEMM"], []
    try:
        import scipy_openblas32  # noqa: PLC0415 (only the build needs it)
    except ImportError as error:
        raise KernelUnavailable(f"{GEMM_ENV}=openblas needs the scipy-openblas32 wheel "
                                "(pip install scipy-openblas32)") from error
    lib_dir = scipy_openblas32.get_lib_dir()
    return ([f"-I{scipy_openblas32.get_include_dir()}"],
            [f"-L{lib_dir}", f"-l{scipy_openblas32.get_library()}", f"-Wl,-rpath,{lib_dir}"])


def library_path(library: str | None = None) -> Path:
    """The cached library for this source, TensorFlow, compiler and link flags and CPU, with
    ``library``'s matrix products (default :func:`gemm_library`)."""
    library = library or gemm_library()
    return _library_path(library, *_gemm_flags(library))


def _library_path(library: str, compile_flags: list[str], link_flags: list[str]) -> Path:
    """:func:`library_path` for ``library`` built with these flags of :func:`_gemm_flags`."""
    key = hashlib.sha256()
    for part in (SOURCE.read_bytes(), tf.__version__.encode(), " ".join(
            (*OPTIMIZE_FLAGS, *tf.sysconfig.get_compile_flags(), *compile_flags,
             *link_flags)).encode(), _cpu_flags().encode()):
        key.update(part)
        key.update(b"\0")
    return kernel_dir() / f"mdlstm_scan-{library}-{key.hexdigest()[:16]}.so"


def build(verbose: bool = True, library: str | None = None) -> Path:
    """Compiles the kernel with ``library``'s matrix products (default :func:`gemm_library`)
    into :func:`library_path` unless it is there; returns the path.

    Raises:
      KernelUnavailable: no compiler, no OpenBLAS wheel for ``openblas``, or the compilation
        failed (first error line).
    """
    library = library or gemm_library()
    compile_flags, link_flags = _gemm_flags(library)
    target = _library_path(library, compile_flags, link_flags)
    if target.exists():
        return target
    compiler = _compiler()
    target.parent.mkdir(parents=True, exist_ok=True)
    if verbose:
        print(f"tfnhr: compiling the MDLSTM scan kernel into {target} (once per machine, "
              f"about {'20 s' if library == 'openblas' else '1 min'} on 2 cores)", file=sys.stderr, flush=True)
    handle, partial = tempfile.mkstemp(suffix=".so.part", dir=target.parent)
    os.close(handle)
    command = [compiler, *OPTIMIZE_FLAGS, *tf.sysconfig.get_compile_flags(), *compile_flags,
               str(SOURCE), "-o", partial, *tf.sysconfig.get_link_flags(), *link_flags]
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines() if "error" in line]
            first = (errors or result.stderr.splitlines() or ["(no output)"])[0]
            raise KernelUnavailable(f"compiling {SOURCE.name} failed: {first.strip()}")
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return target


@functools.cache
def scan_ops() -> ModuleType:
    """The loaded ops module (``tfnhr_mdlstm_scan_forward``, ``..._backward``), built first if
    needed.

    Raises:
      KernelUnavailable: see :func:`build`, or TensorFlow cannot load the library.
    """
    path = build()
    try:
        return tf.load_op_library(str(path))
    except (tf.errors.NotFoundError, OSError) as error:
        raise KernelUnavailable(f"loading {path} failed: {error}") from error


@functools.cache
def unavailable_reason() -> str | None:
    """``None`` when the compiled scan loads here, else why not (one line)."""
    try:
        scan_ops()
    except KernelUnavailable as error:
        return str(error)
    return None


def main() -> int:
    """``python -m tfnhr.ops.scan_kernel``: build (if needed) and load the kernel."""
    try:
        path = build()
        scan_ops()
    except KernelUnavailable as error:
        print(f"tfnhr: {error}", file=sys.stderr)
        return 1
    print(f"tfnhr: MDLSTM scan kernel ready ({gemm_library()} matrix products): {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
