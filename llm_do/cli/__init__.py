"""The `llm-do` command: run, chat with, check and list agent projects. See docs/cli.md."""
