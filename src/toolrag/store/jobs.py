"""Scheduled jobs' leases and reports (monitor/schedule.py): one instance claims a due job, runs it, and keeps its
report; a job keeps its latest REPORTS_KEPT reports. SQL written once for both databases, as store/usage.py's."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tables.py builds these tables
    from toolrag.store.tables import Database

REPORTS_KEPT = 100  # reports kept per scheduled job, the latest


@dataclass(frozen=True)
class JobReport:
    """What one run of a scheduled job found (monitor/schedule.py)."""

    job: str
    at: datetime
    holder: str  # the instance that ran it
    body: dict[str, Any]


class JobTables:
    """Job SQL over one store's database (store/tables.py `Database`)."""

    def __init__(self, database: Database) -> None:
        self._query, self._transaction = database.query, database.transaction
        self._timestamp, self._parse_time, self._sql = (
            database.dialect.timestamp,
            database.dialect.parse_time,
            database.dialect.sql,
        )

    def claim_job(self, job: str, holder: str, now: datetime, lease_until: datetime, last_run_before: datetime) -> bool:
        """Claim `job` for `holder` until `lease_until` if nobody holds it and it last ran before `last_run_before`
        (or never). One transaction: of several instances claiming at once, one gets it."""
        with self._transaction() as db:
            db.execute(
                self._sql(
                    "INSERT INTO job_leases(job, holder, expires_at) VALUES (?, '', ?) ON CONFLICT(job) DO NOTHING"
                ),
                (job, self._timestamp(now)),
            )
            claimed = db.execute(
                self._sql(
                    "UPDATE job_leases SET holder = ?, expires_at = ? WHERE job = ? AND expires_at <= ?"
                    " AND (last_run IS NULL OR last_run < ?) RETURNING job"
                ),
                (holder, self._timestamp(lease_until), job, self._timestamp(now), self._timestamp(last_run_before)),
            ).fetchone()
        return claimed is not None

    def extend_job(self, job: str, holder: str, lease_until: datetime) -> bool:
        """Hold `job` until `lease_until` (a long run renewing its claim); False when `holder` no longer holds it."""
        with self._transaction() as db:
            extended = db.execute(
                self._sql("UPDATE job_leases SET expires_at = ? WHERE job = ? AND holder = ? RETURNING job"),
                (self._timestamp(lease_until), job, holder),
            ).fetchone()
        return extended is not None

    def job_leased(self, job: str, now: datetime) -> bool:
        """Whether an instance holds `job` now (its lease not run out)."""
        rows = self._query(
            self._sql("SELECT 1 FROM job_leases WHERE job = ? AND expires_at > ?"), (job, self._timestamp(now))
        )
        return bool(rows)

    def report_job(self, job: str, holder: str, at: datetime, body: dict[str, Any]) -> None:
        """Keep a report of a run still going (a long run's start), the job still held."""
        with self._transaction() as db:
            self._insert_report(db, job, holder, at, body)

    def finish_job(self, job: str, holder: str, at: datetime, body: dict[str, Any]) -> None:
        """Keep the report of a run and release the job, marking when it ran."""
        with self._transaction() as db:
            self._insert_report(db, job, holder, at, body)
            db.execute(
                self._sql("UPDATE job_leases SET last_run = ?, expires_at = ? WHERE job = ? AND holder = ?"),
                (self._timestamp(at), self._timestamp(at), job, holder),
            )

    def _insert_report(self, db: Any, job: str, holder: str, at: datetime, body: dict[str, Any]) -> None:
        """Keep a report, and only the latest REPORTS_KEPT of its job: a daily job's reports were kept for ever."""
        db.execute(
            self._sql("INSERT INTO job_reports(job, at, holder, body) VALUES (?, ?, ?, ?)"),
            (job, self._timestamp(at), holder, json.dumps(body, ensure_ascii=False, default=str)),
        )
        db.execute(
            self._sql(
                "DELETE FROM job_reports WHERE job = ? AND id NOT IN"
                " (SELECT id FROM job_reports WHERE job = ? ORDER BY at DESC, id DESC LIMIT ?)"
            ),
            (job, job, REPORTS_KEPT),
        )

    def job_reports(self, job: str, limit: int = 10) -> list[JobReport]:
        """The latest reports of a job, newest first."""
        rows = self._query(
            self._sql("SELECT job, at, holder, body FROM job_reports WHERE job = ? ORDER BY at DESC, id DESC LIMIT ?"),
            (job, limit),
        )
        return [
            JobReport(str(name), self._parse_time(at), str(holder), json.loads(body)) for name, at, holder, body in rows
        ]
