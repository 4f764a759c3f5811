# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# The environment is .venv (Python 3.11): activate it with `. .venv/bin/activate` to get `fairpca`.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# every extra the demo, the tests, the benchmarks, the linters and the docs need, at the
# versions of deploy/constraints.txt (pyproject.toml holds only ranges)
EXTRAS ?= all,test,bench,lint,docs
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: env demo test test-fast lint docs hooks compat bench bench-quick clean

$(STAMP): pyproject.toml deploy/constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c deploy/constraints.txt --upgrade pip setuptools
	$(PY) -m pip install --quiet -c deploy/constraints.txt -e ".[$(EXTRAS)]"
	# the editable package's bytecode, which an environment with PYTHONDONTWRITEBYTECODE never
	# caches: ~0.4 s of compiling at every command otherwise (a stale file is recompiled in memory)
	$(PY) -m compileall -q fairpca_dist flows
	# the moments kernel's compiled loops, into Numba's disk cache (~5 s at a new machine's first pass)
	$(PY) -c "from fairpca_dist.engine.gram import compile_kernels; compile_kernels()"
	touch $(STAMP)

env: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fairpca demo $(DEMO_ARGS)

# the full suite (the slow scenarios are `pytest -m slow`, run by make bench)
test: $(STAMP)
	$(PY) -m pytest -q

# a few minutes: the files of .ci/fast-tests.txt
test-fast: $(STAMP)
	$(PY) -m pytest -q $$(grep -v '^#' .ci/fast-tests.txt)

lint: $(STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict -f docs/mkdocs.yml

# ruff format, ruff check and mypy before every commit (.ci/pre-commit-config.yaml)
hooks: $(STAMP)
	$(VENV)/bin/pre-commit install -c .ci/pre-commit-config.yaml

# fresh venvs: oldest and newest numpy/pandas/scikit-learn, a core-only install, the wheel
compat:
	.ci/compat

# every benchmark at full size (hours), then benchmarks/results/README.md; run again after an
# interruption it continues (BENCH_ARGS=--fresh: from scratch); bench-quick: < 10 min
bench: $(STAMP)
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

bench-quick: $(STAMP)
	$(PY) benchmarks/run_all.py --quick $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache benchmarks/scratch
