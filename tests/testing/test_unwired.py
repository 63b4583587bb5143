"""A fresh container per test leaves the application's modules wired to the application's own container."""

from __future__ import annotations

from dependency_injector import containers, providers

from llm_do.testing import unwired

from . import wired_endpoints


class Application(containers.DeclarativeContainer):
    wiring_config = containers.WiringConfiguration(modules=["tests.testing.wired_endpoints"])
    name = providers.Object("application")


def test_a_fresh_container_does_not_rewire_the_applications_modules() -> None:
    application = Application()  # the application's own: wires its modules, as at import
    try:
        assert wired_endpoints.greeting() == "hello application"
        fresh = unwired(Application)
        fresh.name.override("test")
        assert wired_endpoints.greeting() == "hello application"  # not re-wired to the fresh one
        assert fresh.wiring_config.auto_wire  # its own wire() still wires what the class names
        fresh.wire()
        assert wired_endpoints.greeting() == "hello test"
        fresh.unwire()
        Application()  # (made plainly, it re-wires: what unwired avoids)
        assert wired_endpoints.greeting() == "hello application"
    finally:
        application.unwire()
