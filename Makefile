# Two commands set everything up on a fresh machine: `make demo` and `make test`.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: env demo test bench bench-quick clean

$(STAMP): pyproject.toml deploy/constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c deploy/constraints.txt -e ".[test,bench]"
	touch $(STAMP)

env: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fairpca demo $(DEMO_ARGS)

test: $(STAMP)
	$(PY) -m pytest -q

# every benchmark at full size (hours), then benchmarks/results/README.md; run again after an
# interruption it continues (BENCH_ARGS=--fresh: from scratch); bench-quick: < 10 min
bench: $(STAMP)
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

bench-quick: $(STAMP)
	$(PY) benchmarks/run_all.py --quick $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis benchmarks/scratch
