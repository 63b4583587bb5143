"""A web process told to stop: the questions its runs wait on end first, so that a deploy never hangs on them."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterable, Iterator

from ..process.signals import handling

__all__ = ["questions_end_on_signal"]


@contextlib.contextmanager
def questions_end_on_signal(
    stop_asking: Callable[[], object], signums: Iterable[int] = (signal.SIGTERM, signal.SIGINT)
) -> Iterator[None]:
    """While in the block (an application's lifespan), `SIGTERM` or `SIGINT` first calls `stop_asking`
    (`runtime.stop_asking`: the questions waiting for a person are denied with a reason the model reads, and
    every later one at once), then does what it did before: the server's own graceful shutdown (uvicorn's),
    which now finds the runs ending and their streams closing, instead of waiting for answers that cannot come.
    """
    with handling(signums, lambda _signum: stop_asking(), then_former=True):
        yield
