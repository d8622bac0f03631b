"""What the operator's chat model was last asked about each subject with: a hash of everything the question read
(a tool's text, its candidates, the languages, the model, the prompt). A run asks again only where the basis
changed, whatever the answer kept: a tool none of whose written examples survived the checks is not asked again
until its text changes. A cache of questions, not an operator's decision: backups leave it out, and a restored
registry is asked again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from toolrag.model import utc_now

if TYPE_CHECKING:  # tables.py builds these tables
    from toolrag.store.tables import Database

# relations: a tool's proposed requirements (runtime/propose.py); examples: a tool view's written example requests
# (runtime/write_examples.py).
Question = Literal["relations", "examples"]


class AskedBases:
    """The bases questions were last asked with, over one store's database (store/tables.py `Database`)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def bases(self, question: Question) -> dict[str, str]:
        """Each subject's basis for `question`."""
        rows = self._db.read(
            self._db.dialect.sql("SELECT subject, basis FROM asked_bases WHERE question = ?"), (question,)
        )
        return {str(subject): str(basis) for subject, basis in rows}

    def record(self, question: Question, asked: Sequence[tuple[str, str]], db: Any = None) -> None:
        """Each (subject, basis) asked about, in the caller's transaction `db` (None: one of its own)."""
        if db is None:
            with self._db.transaction() as own:
                self.record(question, asked, own)
            return
        dialect = self._db.dialect
        now = dialect.timestamp(utc_now())
        for subject, basis in asked:
            db.execute(
                dialect.sql(
                    "INSERT INTO asked_bases(question, subject, basis, asked_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT(question, subject) DO UPDATE SET basis = excluded.basis, asked_at = excluded.asked_at"
                ),
                (question, subject, basis, now),
            )
