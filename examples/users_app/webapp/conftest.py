"""The tests' database: a fresh SQLite file, named through the environment as in production."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

os.environ["DATABASE_URL"] = f"sqlite:///{Path(tempfile.mkdtemp()) / 'webapp.db'}"
