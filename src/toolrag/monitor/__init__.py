"""Usage monitoring and registry health, reading what usagelog/ wrote: the health report, validation, the
console's readings, scheduled jobs, the startup check."""

from toolrag.monitor.report import HealthReport, ReportRules, build_report

__all__ = ["HealthReport", "ReportRules", "build_report"]
