VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# MCP servers of the ecosystem that the tests run for real (tests/mcp_servers/package.json).
NODE_SERVERS := tests/mcp_servers/node_modules/.installed
# The Vercel AI SDK (npm package `ai`) whose client the tests run against the example's chat (tests/ai_sdk/package.json).
AI_SDK := tests/ai_sdk/node_modules/.installed

.PHONY: setup browser preflight test test-deep test-lowest test-evals lint typecheck pytest demo real-model bench bench-suite bench-service bench-faults bench-cli bench-jobs bench-journal bench-mcp bench-sessions bench-deploy bench-anywhere bench-survive clean

$(STAMP): pyproject.toml
	@python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python 3.11 or newer is needed as python3 (this one is $$(python3 -V 2>&1)); install it (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(NODE_SERVERS): tests/mcp_servers/package.json tests/mcp_servers/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm (Node.js 20 or later) is needed to install the test MCP server @modelcontextprotocol/server-filesystem (tests/mcp_servers/package.json); install Node.js" >&2; exit 1; }
	npm ci --prefix tests/mcp_servers --no-audit --no-fund --loglevel=error --fetch-retries=1 --fetch-retry-mintimeout=1000 --fetch-retry-maxtimeout=2000 --fetch-timeout=30000 \
		|| { echo "could not install the test MCP server @modelcontextprotocol/server-filesystem (npm ci --prefix tests/mcp_servers)" >&2; exit 1; }
	touch $@

$(AI_SDK): tests/ai_sdk/package.json tests/ai_sdk/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm (Node.js 20 or later) is needed to install the Vercel AI SDK's client for the tests (npm package ai, tests/ai_sdk/package.json); install Node.js" >&2; exit 1; }
	npm ci --prefix tests/ai_sdk --no-audit --no-fund --loglevel=error --fetch-retries=1 --fetch-retry-mintimeout=1000 --fetch-retry-maxtimeout=2000 --fetch-timeout=30000 \
		|| { echo "could not install the Vercel AI SDK's client, npm package ai (npm ci --prefix tests/ai_sdk)" >&2; exit 1; }
	touch $@

# Debian's chromium, which the browser tests drive with Playwright (tests/web/test_web_page.py): installed with
# apt-get when missing and run as root, else one line says how to install it.
CHROMIUM := /usr/bin/chromium

browser:
	@test -x $(CHROMIUM) || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing Debian's chromium for the browser tests (apt-get install chromium)"; \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
				|| { echo "could not install Debian's chromium: run 'apt-get install chromium' as root" >&2; exit 1; }; \
		else \
			echo "Debian's chromium ($(CHROMIUM)) is needed for the browser tests: run 'sudo apt-get install chromium'" >&2; exit 1; \
		fi; }

setup: $(STAMP) $(NODE_SERVERS) $(AI_SDK) browser

# What the suite needs beyond the virtualenv, checked in seconds: chromium is there, a PostgreSQL server starts.
preflight: $(STAMP) browser
	$(PY) -m tests.postgres

lint: $(STAMP)
	$(VENV)/bin/ruff check --no-cache .
	$(VENV)/bin/ruff format --check --no-cache .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set: the suite starts a few hundred Python processes
# (commands, workers, servers) that would each compile llm_do again, and pytest would rewrite every test's asserts.
pytest: $(STAMP) $(NODE_SERVERS) $(AI_SDK) browser
	env -u PYTHONDONTWRITEBYTECODE $(VENV)/bin/pytest -q -n auto --dist worksteal --ignore=tests/evals

test: preflight lint typecheck pytest test-evals

# Evaluations with pydantic-evals (the `evals` extra), whose releases pin pydantic-ai 2.62: its tests and the
# examples' evaluations run in a virtualenv of their own, part of `make test`.
EVALS := .venv-evals
EVALS_STAMP := $(EVALS)/.installed

$(EVALS_STAMP): pyproject.toml
	test -x $(EVALS)/bin/python || python3 -m venv $(EVALS)
	$(EVALS)/bin/python -m pip install --quiet --upgrade pip
	$(EVALS)/bin/python -m pip install --quiet -e '.[test,evals]'
	touch $@

test-evals: $(EVALS_STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(EVALS)/bin/pytest -q -n 2 tests/evals

# The deep tier (tests/tiers.py): only the tests marked `deep`, at full size: 2,000 fuzz examples per built-in
# toolset and the long soaks. CI runs it after `make test`.
test-deep: $(STAMP) $(NODE_SERVERS) $(AI_SDK) browser
	env -u PYTHONDONTWRITEBYTECODE LLM_DO_TEST_TIER=deep $(VENV)/bin/pytest -q -n auto --dist worksteal -m deep --ignore=tests/evals

# The lowest versions of its dependencies that pyproject.toml declares (ci/constraints-lowest.txt), in a virtualenv
# of their own with only what the quick tier needs (the `test` extra, so not the command's `cli` extra): llm_do
# imports there and runs an agent without PyYAML and rich, llm_do.project and the llm-do command name the extra
# they need (ci/lowest.py), and the core's tests pass (runs, scopes, approvals, DI, toolkit, model limits; about
# 30 s), but those marked `cli`, which need the extra. CI runs it after `make test`.
LOWEST := .venv-lowest
LOWEST_STAMP := $(LOWEST)/.installed
QUICK_TIER := tests/run tests/scopes tests/approvals tests/di tests/toolkit tests/guards/test_model_limits.py
# the observers that fail there are OpenTelemetry SDK tracers (the `otel` extra, not installed in this tier)
QUICK_TIER_IGNORE := --ignore=tests/scopes/test_observer_isolation.py

$(LOWEST_STAMP): pyproject.toml ci/constraints-lowest.txt
	test -x $(LOWEST)/bin/python || python3 -m venv $(LOWEST)
	$(LOWEST)/bin/python -m pip install --quiet --upgrade pip
	$(LOWEST)/bin/python -m pip install --quiet -e '.[test]' -c ci/constraints-lowest.txt
	touch $@

test-lowest: $(LOWEST_STAMP)
	$(LOWEST)/bin/python ci/lowest.py
	env -u PYTHONDONTWRITEBYTECODE $(LOWEST)/bin/pytest -q -n auto --dist worksteal -m "not cli" $(QUICK_TIER) $(QUICK_TIER_IGNORE)

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

# A short conversation with a real model on this machine, and how fast it went (not part of make test; see
# docs/local-models.md): URL=... MODEL=... for an OpenAI-compatible server you run, or GGUF=path/to/model.gguf to
# serve a model file you downloaded with llama.cpp's llama-server. No model is downloaded.
real-model: $(STAMP)
	$(PY) benchmarks/real_model.py $(if $(URL),--url '$(URL)') $(if $(MODEL),--model '$(MODEL)') $(if $(GGUF),--gguf '$(GGUF)')

bench: $(STAMP)
	$(PY) benchmarks/bench_scopes.py
	$(PY) benchmarks/bench_memory.py

bench-suite: $(STAMP) $(NODE_SERVERS) $(AI_SDK) browser
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_suite.py

bench-service: $(STAMP)
	$(PY) benchmarks/bench_service.py

bench-faults: $(STAMP)
	$(PY) benchmarks/bench_faults.py

bench-cli: $(STAMP)
	$(PY) benchmarks/bench_cli.py

bench-jobs: $(STAMP)
	$(PY) benchmarks/bench_jobs.py --svg docs/bench-jobs.svg  # published run: under nice -n -15, see docs/benchmarks.md

bench-journal: $(STAMP)
	$(PY) benchmarks/bench_journal.py

bench-mcp: $(STAMP)
	$(PY) benchmarks/bench_mcp.py

bench-sessions: $(STAMP)
	$(PY) benchmarks/bench_sessions_web.py

bench-deploy: $(STAMP)
	$(PY) benchmarks/bench_deploy.py

bench-anywhere: $(STAMP)
	$(PY) benchmarks/bench_anywhere.py --browser

bench-survive: $(STAMP)
	$(PY) benchmarks/bench_survive.py

clean:
	rm -rf $(VENV) $(LOWEST) $(EVALS) .mypy_cache .pytest_cache .ruff_cache tests/mcp_servers/node_modules tests/ai_sdk/node_modules
