"""Usage monitoring and registry health: the usage log recorder, the health report, validation, metrics."""

from toolrag.monitor.config import MonitorConfig
from toolrag.monitor.report import HealthReport, ReportRules, build_report

__all__ = ["HealthReport", "MonitorConfig", "ReportRules", "build_report"]
