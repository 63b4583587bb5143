"""The `llm-do` command: run, chat with, check and list agent projects. See docs/cli.md.

May import: llm_do, errors, files, approvals, di, results, events, sessions, run, models, jobs, project, process.
"""
