"""The defaults of learning relations from usage (search/learned.py), apart so that the command line reads them
without importing what learning needs."""

# Defaults (why: docs/architecture.md "Whole sets"). Five distinct sessions: fewer is what one user trying a tool
# pair out a few times makes; a session counts once per pair, so an agent looping between two tools is one.
MIN_SESSIONS = 5
# Three in ten of the sessions that called A called B next: the next tool of a catalog's common flows (search, then
# open) clears it, while a tool called after A now and then, among many others, does not.
MIN_STRENGTH = 0.3
# And those sessions from three distinct callers of the tenant (issue 48, R4-5): a client names its sessions, so one
# caller could mint all five, and a tenant's relation moves every one of its principals' searches. Three, not five: a
# tenant whose agents run under a few identities still learns. Not two: one person often holds two (a laptop's
# token and a bot's).
MIN_CALLERS = 3
MAX_RELATED = 5  # per tool and learner: the strongest; a set adds at most a few anyway
WINDOW_DAYS = 30  # how far back a run reads, at most
# And how many calls at most, each learner's latest: a run's cost per tenant is bounded whatever the log holds, and
# one tenant's flood of calls never pushes another's history out of the window (issue 48, R4-5).
MAX_CALLS = 200_000
