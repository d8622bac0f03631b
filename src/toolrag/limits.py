"""Limits that several layers share (search, the API, the gateway, the command line); no imports, so any of them
can read these without loading the rest."""

MAX_K = 5  # tools one search returns at most
# A request longer than this is refused: no tool request needs more, and every step after it (embedding,
# tokenizing, logging) costs time in proportion to its length, on a thread other clients are waiting for.
MAX_REQUEST_CHARS = 4000
