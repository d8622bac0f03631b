"""What SQLite and PostgreSQL spell differently, so that the store's SQL is written once.

Statements are written with `?` placeholders and in the subset both databases share (`ON CONFLICT ... DO UPDATE`,
`RETURNING`, `COALESCE`); a `Dialect` rewrites the placeholders for psycopg and converts timestamps both ways.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Dialect:
    name: str
    placeholder: str
    timestamp: Callable[[datetime], object]  # a datetime as the database stores it
    parse_time: Callable[[Any], datetime]  # and back
    day: str  # the expression for the UTC day of `at`, as YYYY-MM-DD
    text_cast: str = ""  # appended to a JSON column to read it as its text (PostgreSQL's JSON type parses it)

    def sql(self, text: str) -> str:
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    def as_text(self, column: str) -> str:
        return column + self.text_cast


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def _from_iso(value: Any) -> datetime:
    return datetime.fromisoformat(str(value))


def _same(value: Any) -> Any:
    return value


SQLITE = Dialect("sqlite", "?", _iso, _from_iso, "substr(at, 1, 10)")
POSTGRES = Dialect("postgresql", "%s", _same, _same, "to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD')", "::text")
