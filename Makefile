# Every target runs scripts/setup.sh first: it is idempotent (seconds when nothing changed),
# so `make demo` and `make test` each work on a fresh machine by themselves.
VENV ?= .venv
PY := $(VENV)/bin/python
NP ?= 2
# Test processes (pytest-xdist); one per core of a 2-core CI machine. Each test file stays in one.
TEST_WORKERS ?= 2

.PHONY: setup demo demo-full demo-horovod test test-fast bench bench-fashion clean

setup:
	TFNHR_VENV=$(abspath $(VENV)) ./scripts/setup.sh

# The main job: train the small-stem recognizer on the embedded synthetic handwriting set (<= 20 min
# on 2 cores) and print validation/test CER/WER on held-out fonts, greedy and with an LM.
demo: setup
	TF_CPU_ALLOCATOR_USE_BFC=true TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m tfnhr.commands.main_job

# The same in about an hour (49 minutes of training), with the larger stem-80 recognizer on more
# lines of all 204 training fonts.
demo-full: setup
	TF_CPU_ALLOCATOR_USE_BFC=true TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m tfnhr.commands.main_job --preset full --out runs/main-full

# A toy MDLSTM digit-string reader trained under Horovod with $(NP) local Gloo workers.
demo-horovod: setup
	$(VENV)/bin/horovodrun -np $(NP) -H localhost:$(NP) --gloo $(PY) -m horovod_jobs.demo

# Everything (what CI runs).
test: setup
	$(PY) -m pytest tests -q -n $(TEST_WORKERS) --dist loadfile --durations=15

# The quick loop (under 2 min on 2 cores): no tests marked slow, horovod or subprocess (setup.cfg).
test-fast: setup
	$(PY) -m pytest tests -q -n $(TEST_WORKERS) --dist loadfile -m "not slow and not horovod and not subprocess"

# Benchmarks (single thread, JSON into build/bench/); each prints its table too.
bench: setup
	mkdir -p build/bench
	taskset -c 0 $(PY) benchmarks/mdlstm_speed.py --threads 1 --tuned-env --out build/bench/mdlstm_speed.json
	taskset -c 0 $(PY) benchmarks/packing_vs_padding.py --threads 1 --out build/bench/packing_vs_padding.json
	taskset -c 0 $(PY) benchmarks/mlcn_vs_capsnet.py --threads 1 --out build/bench/mlcn_vs_capsnet.json
	taskset -c 0 $(PY) benchmarks/placement.py --threads 1 --out build/bench/placement.json
	taskset -c 0 $(PY) benchmarks/lstm_speed.py --threads 1 --out build/bench/lstm_speed.json
	taskset -c 0 $(PY) benchmarks/hdf5_vs_folder.py --threads 1 --out build/bench/hdf5_vs_folder.json
	taskset -c 0 $(PY) benchmarks/page_reading.py --threads 1 --out build/bench/page_reading.json
	taskset -c 0 $(PY) benchmarks/image_decoding.py --threads 1 --out build/bench/image_decoding.json
	taskset -c 0 $(PY) benchmarks/planner_speed.py --threads 1 --out build/bench/planner_speed.json
	taskset -c 0 $(PY) benchmarks/config_vs_preset.py --threads 1 --out build/bench/config_vs_preset.json
	$(PY) benchmarks/service_throughput.py --out build/bench/service_throughput.json
	taskset -c 0 $(PY) benchmarks/augment_speed.py --threads 1 --out build/bench/augment_speed.json
	taskset -c 0 $(PY) benchmarks/training_throughput.py --threads 1 --out build/bench/training_throughput.json
	$(PY) benchmarks/training_throughput.py --workers 2 --configs 190000:1 --scan-kernels ops,compiled --presets small --out build/bench/training_throughput_workers.json
	$(PY) benchmarks/mlcn_model_parallel.py --out build/bench/mlcn_model_parallel.json

# Fashion-MNIST accuracy of MLCN vs CapsNet at equal training time (about 35 min; the data comes
# from Debian's dataset-fashion-mnist, installed here when missing and running as root).
bench-fashion: setup
	mkdir -p build/bench
	test -d /usr/share/datasets/fashion-mnist || [ "$$(id -u)" != 0 ] || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist
	taskset -c 0 $(PY) benchmarks/fashion_mnist_accuracy.py --threads 1 --minutes 10 \
		--out build/bench/fashion_mnist_accuracy.json

clean:
	rm -rf $(VENV) build .pytest_cache .hypothesis
