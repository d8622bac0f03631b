"""The defaults of learning relations from usage (search/learned.py), apart so that the command line reads them
without importing what learning needs."""

# Defaults (why: docs/architecture.md "Whole sets"). Five distinct sessions: fewer is what one user trying a tool
# pair out a few times makes; a session counts once per pair, so an agent looping between two tools is one.
MIN_SESSIONS = 5
# Three in ten of the sessions that called A called B next: the next tool of a catalog's common flows (search, then
# open) clears it, while a tool called after A now and then, among many others, does not.
MIN_STRENGTH = 0.3
MAX_RELATED = 5  # per tool and learner: the strongest; a set adds at most a few anyway
WINDOW_DAYS = 30  # how far back a run reads, at most
MAX_CALLS = 200_000  # and how many calls at most, the latest: a run's cost is bounded whatever the log holds
