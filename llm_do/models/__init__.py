"""Record and replay models: run agents offline from a recording of a real model's responses.

```python
model = RecordingModel(real_model, "session.json")   # record while running for real
model = ReplayModel.from_file("session.json")        # then answer from the file, offline
```

May import: errors, scopes, files, tracing, run.
"""

from .journal import Journal, JournalEntry, JournalModel, JournalStore, JournalUnreachable, WentLive
from .keys import HANDLE_PATTERN, KeyCache, RequestKey, current_chain, request_key
from .observed import ObservedModel
from .record import RecordingModel
from .recording import FORMAT_VERSION, RecordedResponse, Recording, RecordingError, ScriptStep
from .replay import AttachmentMismatch, MissingResponse, ReplayModel, UnknownRecordedHandle

__all__ = [
    "FORMAT_VERSION",
    "AttachmentMismatch",
    "HANDLE_PATTERN",
    "KeyCache",
    "Journal",
    "JournalEntry",
    "JournalModel",
    "JournalStore",
    "JournalUnreachable",
    "MissingResponse",
    "ObservedModel",
    "RecordedResponse",
    "Recording",
    "RecordingError",
    "RecordingModel",
    "ReplayModel",
    "RequestKey",
    "ScriptStep",
    "UnknownRecordedHandle",
    "WentLive",
    "current_chain",
    "request_key",
]
