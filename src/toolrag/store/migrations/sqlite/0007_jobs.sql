-- Scheduled jobs (monitor/schedule.py): the reports they write, kept to compare week to week, and the leases that
-- let one of several instances sharing this registry run each job.
CREATE TABLE job_reports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL,
    at TEXT NOT NULL,
    holder TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX job_reports_by_job ON job_reports(job, at);
CREATE TABLE job_leases (
    job TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    last_run TEXT
);
