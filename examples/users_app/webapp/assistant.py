"""The assistant: an agent that finds users and deactivates them, each deactivation approved by the person, in the
request's transaction."""

from __future__ import annotations

from types import TracebackType

from dependency_injector.wiring import Provide

from llm_do import Toolset, tool

from .database import Database
from .repositories import UserNotFoundError, UserRepository

INSTRUCTIONS = """You manage the users of this application. Find a user by email before acting on them.
Deactivate a user only when the person asks you to."""


class UnitOfWork:
    """One request's transaction (per run): what the assistant writes is kept when the request ends well, and rolled
    back when it fails, is cancelled, or a write is refused."""

    def __init__(self, db: Database) -> None:
        self.session = db.connect()
        self.session.execute("BEGIN")

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.session.execute("COMMIT" if exc is None else "ROLLBACK")
        finally:
            self.session.close()


class UserTools(Toolset):
    """The application's own repository and transaction, given to each call by the container."""

    @tool(read_only=True)
    def find_user(self, email: str, users: UserRepository = Provide["user_repository"]) -> str:
        """Find the user with `email`: their id and whether they are active."""
        try:
            user = users.get_by_email(email)
        except UserNotFoundError:
            return f"no user has the email {email}"
        return f"user {user.id} ({user.email}) is {'active' if user.is_active else 'inactive'}"

    @tool
    def deactivate_user(self, user_id: int, work: UnitOfWork = Provide["unit_of_work"]) -> str:
        """Deactivate user `user_id` (kept only if this request ends well)."""
        if work.session.execute("UPDATE users SET is_active = 0 WHERE id = ?", (user_id,)).rowcount == 0:
            return f"there is no user {user_id}"
        return f"user {user_id} is deactivated"
