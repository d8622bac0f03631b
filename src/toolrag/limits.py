"""Limits that several layers share (search, the API, the gateway, the command line); nothing but the standard
library imported, so any of them can read these without loading the rest."""

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

MAX_K = 5  # tools one search returns at most for one step
MAX_SET_TOOLS = 16  # tools a set holds at most, beyond the less likely of the tools it was retrieved for
# Search reads this much of a request (more than its embedding models read); longer ones are searched in part, with
# data blobs left out (search/request.py), and the answer says so.
MAX_REQUEST_CHARS = 4000
# What the edges accept as one request's text (the API's /search, the gateway's find_tools): a pasted document or
# image fits; every step after it is linear in its length, and the HTTP body cap bounds it again.
MAX_MESSAGE_CHARS = 100_000

# A model endpoint's answer read at most (runtime/chat_models.py): an answer of a few thousand tokens is some 50 kB.
MAX_CHAT_ANSWER_BYTES = 4 * 1024 * 1024
# An embeddings endpoint's answer read at most, per text embedded (embed/openai_compat.py): a vector of 3,072
# numbers written as JSON is some 70 kB.
MAX_EMBEDDING_ANSWER_BYTES_PER_TEXT = 256 * 1024


# Asked of an endpoint whose answer is counted: the bytes counted are then the bytes kept (a few kB of a compressed
# answer can unpack to gigabytes before any count sees them).
UNCOMPRESSED = {"Accept-Encoding": "identity"}


def uncompressed(content_encoding: str | None) -> bool:
    """Whether an answer with this Content-Encoding header came as asked, uncompressed."""
    return (content_encoding or "").strip().lower() in ("", "identity")


def read_at_most(chunks: Iterable[bytes], cap: int, seconds: float) -> bytes | None:
    """The bytes of `chunks` joined, or None as soon as they pass `cap` or `seconds` have passed (the rest is never
    read): an HTTP answer from an endpoint the operator named, which may be broken or hostile, kept from filling the
    memory, or from holding a call for days one byte a minute (a timeout bounds each read, not the whole answer)."""
    deadline = time.monotonic() + seconds
    body = bytearray()
    for chunk in chunks:
        body += chunk
        if len(body) > cap or time.monotonic() > deadline:
            return None
    return bytes(body)


@dataclass
class TokenBucket:
    """`burst` tokens at most, refilled at `rate` a second: what a caller (access/rate_limit.py) or an upstream's
    lines (mcp/relay.py) may spend."""

    tokens: float
    at: float  # when `tokens` was last counted, on the caller's clock

    def take(self, now: float, rate: float, burst: float) -> float:
        """0 when a token was there (and is spent); else the seconds until one is."""
        self.tokens, self.at = min(burst, self.tokens + (now - self.at) * rate), now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / rate


# Threads of the BLAS library (numpy's OpenBLAS) for large batches, when `start_blas_small` set them aside.
BATCH_THREADS_VARIABLE = "TOOLRAG_BLAS_THREADS"


def start_blas_small() -> None:
    """Start the BLAS library with one thread, in a process (the `toolrag` command) that mostly embeds one request:
    OpenBLAS starts a thread per core when numpy is imported, and they spin for about 0.07 s of CPU, a tenth of a
    cold search. Large batches still use every core (`batch_threads`). Works only before numpy is imported; a
    thread count the user set is kept."""
    if "OPENBLAS_NUM_THREADS" not in os.environ:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        os.environ.setdefault(BATCH_THREADS_VARIABLE, str(len(os.sched_getaffinity(0))))


def batch_threads() -> int | None:
    """BLAS threads for a large batch: those `start_blas_small` set aside, else None (every thread the library
    started with)."""
    configured = os.environ.get(BATCH_THREADS_VARIABLE, "")
    return int(configured) if configured.isdigit() and int(configured) > 0 else None
