"""The usage log's write path, below the registry that feeds it: the recorder, redaction, `MonitorConfig`.

monitor/ reads what is written here (the health report, the console's views); store/usage.py holds the tables.
"""

from toolrag.usagelog.config import MonitorConfig

__all__ = ["MonitorConfig"]
