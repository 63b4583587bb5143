"""Repositories module."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager

from .models import User

SessionFactory = Callable[[], AbstractContextManager[sqlite3.Connection]]


class UserRepository:
    def __init__(self, session_factory: SessionFactory) -> None:
        self.session_factory = session_factory

    def get_all(self) -> list[User]:
        with self.session_factory() as session:
            return [_user(row) for row in session.execute("SELECT * FROM users ORDER BY id")]

    def get_by_id(self, user_id: int) -> User:
        with self.session_factory() as session:
            row = session.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()
            if row is None:
                raise UserNotFoundError(user_id)  # inside the session, as the original: it logs the rollback
            return _user(row)

    def get_by_email(self, email: str) -> User:
        with self.session_factory() as session:
            row = session.execute("SELECT * FROM users WHERE email = ?", (email,)).fetchone()
            if row is None:
                raise UserNotFoundError(email)
            return _user(row)

    def add(self, email: str, password: str, is_active: bool = True) -> User:
        with self.session_factory() as session:
            cursor = session.execute(
                "INSERT INTO users (email, hashed_password, is_active) VALUES (?, ?, ?)", (email, password, is_active)
            )
            user_id = cursor.lastrowid
        assert user_id is not None
        return User(user_id, email, password, is_active)

    def delete_by_id(self, user_id: int) -> None:
        with self.session_factory() as session:
            if session.execute("DELETE FROM users WHERE id = ?", (user_id,)).rowcount == 0:
                raise UserNotFoundError(user_id)


def _user(row: tuple[int, str, str, int]) -> User:
    return User(row[0], row[1], row[2], bool(row[3]))


class NotFoundError(Exception):
    entity_name: str

    def __init__(self, entity_id: object) -> None:
        super().__init__(f"{self.entity_name} not found, id: {entity_id}")


class UserNotFoundError(NotFoundError):
    entity_name: str = "User"
