"""What PostgreSQL's columns can hold of llm-do's data: JSON as `json` (its text), NUL characters in text.

`jsonb` refuses a string holding a NUL character (`\\u0000`) and `text` refuses the character itself,
while a model's output, a tool's arguments or a response can hold one; the row would be lost.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, sql

__all__ = ["add_missing_column", "storable_text", "store_json_as_text"]

_JSONB_COLUMNS = """
SELECT column_name FROM information_schema.columns
 WHERE table_schema = current_schema() AND table_name = %s AND column_name = ANY(%s) AND data_type = 'jsonb'
"""


async def store_json_as_text(conn: AsyncConnection[Any], table: str, *columns: str) -> None:
    """Turn the `jsonb` columns among `columns` of `table` (made by an earlier llm-do) into `json`."""
    rows = await (await conn.execute(_JSONB_COLUMNS, (table, list(columns)))).fetchall()
    for (column,) in rows:
        await conn.execute(
            sql.SQL("ALTER TABLE {table} ALTER COLUMN {column} TYPE json USING {column}::json").format(
                table=sql.Identifier(table), column=sql.Identifier(column)
            )
        )


_HAS_COLUMN = """
SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = %s AND column_name = %s
"""


async def add_missing_column(conn: AsyncConnection[Any], table: str, column: str, definition: str) -> None:
    """Add `column` to `table` (made by an earlier llm-do) when it lacks it. Checked first: even with `IF NOT
    EXISTS`, ALTER TABLE takes the table's exclusive lock, waiting for every query on it while every new one
    waits behind it, at each start of every worker."""
    if await (await conn.execute(_HAS_COLUMN, (table, column))).fetchone() is None:
        await conn.execute(
            sql.SQL("ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {definition}").format(
                table=sql.Identifier(table), column=sql.Identifier(column), definition=sql.SQL(definition)
            )
        )


def storable_text(text: str) -> str:
    """`text` as a PostgreSQL `text` column can hold it: a NUL character (which it refuses) written `\\x00`."""
    return text.replace("\x00", "\\x00")


def stored_as_given(*texts: str) -> bool:
    """Whether each of `texts` can be a PostgreSQL `text` as it is: one holding a NUL character never is, so no
    row holds it (an id or a key looked up with it names nothing there)."""
    return all("\x00" not in text for text in texts)
