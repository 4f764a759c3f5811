# Two commands set everything up on a fresh machine: `make demo` and `make test`.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: env demo test bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,bench]"
	touch $(STAMP)

env: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fairpca demo $(DEMO_ARGS)

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/bench_moments.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis benchmarks/scratch
