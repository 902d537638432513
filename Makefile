# The two commands of the README. Both run the idempotent set-up first.
PY := .venv/bin/python

.PHONY: setup demo test test-fast test-unit lint bench

setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) jobs/demo_pipeline.py $(ARGS)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check pravega_spark jobs tests bench

bench: setup
	$(PY) bench/append_read.py
