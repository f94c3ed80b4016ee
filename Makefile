# Every target runs scripts/setup.sh first: it is idempotent (seconds when nothing changed),
# so `make demo` and `make test` each work on a fresh machine by themselves.
VENV ?= .venv
PY := $(VENV)/bin/python
NP ?= 2

.PHONY: setup demo test bench clean

setup:
	TFNHR_VENV=$(abspath $(VENV)) ./scripts/setup.sh

# The main job on the embedded default data, under Horovod with $(NP) local workers.
demo: setup
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
