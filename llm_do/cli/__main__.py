"""`python -m llm_do.cli`: the `llm-do` command."""

from .main import main

raise SystemExit(main())
