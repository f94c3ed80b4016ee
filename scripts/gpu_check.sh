#!/usr/bin/env bash
# GPU readiness check in one call (benchmarks/gpu_check.py with the project's venv): devices,
# MDLSTM2D forward+backward L1-L4, recognizer training steps (small/large, packed/padded, mixed
# precision off/on) and the export's serving latency, on the GPU (if TensorFlow sees one) and the
# CPU. On a CPU-only machine it reports the CPU alone; CI runs it that way with --quick.
#
#   scripts/gpu_check.sh [--quick] [--repeats N] [--out report.json]
#
# Environment: TFNHR_VENV (default .venv), TFNHR_GPU_CHECK_TIMEOUT (seconds, default 480).
# Exit status: 0 all measured, 1 a measurement failed (listed), 2 no venv, 124 the time limit.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${TFNHR_VENV:-$repo/.venv}
if [ ! -x "$venv/bin/python" ]; then
  echo "gpu_check: no virtualenv at $venv: run 'make setup' (on a GPU host: TFNHR_TF=cuda make setup)" >&2
  exit 2
fi
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
exec timeout "${TFNHR_GPU_CHECK_TIMEOUT:-480}" "$venv/bin/python" "$repo/benchmarks/gpu_check.py" "$@"
