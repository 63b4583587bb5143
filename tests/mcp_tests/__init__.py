"""Tests of llm_do.mcp. Not `tests/mcp`: `python tests/cli_warm.py` puts tests/ first on sys.path, where a
folder named `mcp` would hide the `mcp` library."""
