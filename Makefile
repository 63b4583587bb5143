VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup test lint typecheck pytest demo bench bench-service bench-faults bench-cli bench-jobs bench-mcp clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP)
	$(VENV)/bin/pytest -q -n auto --dist worksteal

test: lint typecheck pytest

demo: $(STAMP)
	$(PY) examples/ledger/main.py
	@echo
	$(PY) examples/sql_clerk/sql_clerk.py
	@echo
	env -u LLM_DO_DATABASE_URL $(VENV)/bin/llm-do run examples/bank_clerk --model replay:examples/bank_clerk/recording.json --approve-all -v
	@echo
	$(VENV)/bin/llm-do run examples/notes_desk --model test --approve-all -v
	@echo
	$(VENV)/bin/llm-do run examples/review_desk --model replay:examples/review_desk/recording.json --approve-all -v

bench: $(STAMP)
	$(PY) benchmarks/bench_scopes.py
	$(PY) benchmarks/bench_memory.py

bench-service: $(STAMP)
	$(PY) benchmarks/bench_service.py

bench-faults: $(STAMP)
	$(PY) benchmarks/bench_faults.py

bench-cli: $(STAMP)
	$(PY) benchmarks/bench_cli.py

bench-jobs: $(STAMP)
	$(PY) benchmarks/bench_jobs.py --svg docs/bench-jobs.svg  # published run: under nice -n -15, see docs/benchmarks.md

bench-mcp: $(STAMP)
	$(PY) benchmarks/bench_mcp.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
