"""`RuntimeResource`: the runtime as a provider of the application's own container."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..di._container import ClosedFirst
from ._runtime import Runtime


class RuntimeResource(ClosedFirst):
    """A `Runtime` declared in the application's container, opened and closed as its resources are.

    ```python
    class Container(containers.DeclarativeContainer):
        __self__ = providers.Self()
        runtime = RuntimeResource(__self__, entries=[assistant], approver=ask)
    ```

    `container.init_resources()` (or the first `container.runtime()`) opens it; `shutdown_resources()` closes it
    first, waiting for its runs, before the container's other resources (the pools its runs use); the runtime
    leaves those to the container. Endpoints take it as any resource (`runtime: Runtime = Provide[Container.runtime]`),
    and tests override it as any provider. The keywords are `Runtime`'s.
    """

    def __init__(self, container: Any = None, /, **options: Any) -> None:
        if container is None:  # (dependency-injector copies a provider by making a bare one and setting it)
            super().__init__()
        else:
            super().__init__(_serve, container, **options)


async def _serve(container: Any, **options: Any) -> AsyncIterator[Runtime]:
    async with Runtime(container, shutdown_resources=False, **options) as runtime:
        yield runtime
