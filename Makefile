# Every target runs scripts/setup.sh first: it is idempotent (seconds when nothing changed),
# so `make demo` and `make test` each work on a fresh machine by themselves.
VENV ?= .venv
PY := $(VENV)/bin/python
NP ?= 2

.PHONY: setup demo demo-full demo-horovod test bench clean

setup:
	TFNHR_VENV=$(abspath $(VENV)) ./scripts/setup.sh

# The main job: train the small recognizer on the embedded synthetic handwriting set (<= 20 min
# on 2 cores) and print validation/test CER/WER on held-out fonts, greedy and with an LM.
demo: setup
	TF_CPU_ALLOCATOR_USE_BFC=true $(PY) -m tfnhr.main_job

# The same, longer and on more data (far lower error rates).
demo-full: setup
	TF_CPU_ALLOCATOR_USE_BFC=true $(PY) -m tfnhr.main_job --preset full --out runs/main-full

# A toy MDLSTM digit-string reader trained under Horovod with $(NP) local Gloo workers.
demo-horovod: setup
	$(VENV)/bin/horovodrun -np $(NP) -H localhost:$(NP) --gloo $(PY) -m horovod_jobs.demo

test: setup
	$(PY) -m pytest tests -q

# Benchmarks (single thread, JSON into build/bench/); each prints its table too.
bench: setup
	mkdir -p build/bench
	taskset -c 0 $(PY) benchmarks/mdlstm_speed.py --threads 1 --tuned-env --out build/bench/mdlstm_speed.json
	taskset -c 0 $(PY) benchmarks/packing_vs_padding.py --threads 1 --out build/bench/packing_vs_padding.json

clean:
	rm -rf $(VENV) build .pytest_cache .hypothesis
