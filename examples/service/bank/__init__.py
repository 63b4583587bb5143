"""A bank service built on llm-do: FastAPI, PostgreSQL (asyncpg) and a teller agent per request.

- `bank.wiring`: the application container (global pool, per-run audit, per-call ledger toolset)
  and the teller entry;
- `bank.app`: the FastAPI app (`create_app`; `create_transfer_app` without the job endpoints),
  whose lifespan starts and closes the `Runtime`;
- `bank.toolsets`, `bank.ledger`: the tools and the SQL under them;
- `bank.model`: the scripted model that stands in for an LLM, so it all runs offline;
- `bank.plain`: the same endpoint written with plain pydantic-ai (for the benchmark).

The package is called `bank`, not `containers`: a module named `containers` next to your code would
shadow llm-do's `containers` package (see docs/integration.md).
"""
