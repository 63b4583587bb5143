"""The processes llm-do runs in and starts: process groups it starts never outlive it (`children`), and
signal handlers that leave the process's signals as they were found (`signals`). Standard library only.

May import: the standard library only.
"""
