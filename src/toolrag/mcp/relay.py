"""A relay between the gateway and a stdio MCP server that stops reading a message at the size cap.

The MCP SDK's stdio client reads a whole line before parsing it, and joins its chunks in a way that grows with the
square of the line's length: a hostile server's 20 MB result took 9 s of the gateway's CPU before it was refused.
The gateway starts each stdio upstream under this relay instead: the server's stdin is its own, its stdout
passes through here in linear time, line by line, and a line past `--max-bytes` is not buffered but skipped
to its end; the request it answered gets a JSON-RPC error saying why (its id is read from the line's first or last
bytes, wherever the server's serializer put it), so the call fails at once and the connection stays up. A line
under the cap is checked against the other bounds of one message (nesting, content parts, tools in a page:
mcp/bounds.py) here, in the relay's process, before the gateway's SDK parses it.

The server's stderr passes through to the relay's own, drained to its end whatever becomes of the relay's (a server
whose stderr nobody reads blocks once the pipe is full), and its last line is kept: a server that exits with an
error status gets a last message from the relay, a logging notification of logger `toolrag.relay` saying so with
that line (`{"ended": "exited with status 1", "output": "... No module named mcp_server_tiem"}`): the gateway says
the first to everyone instead of a bare "Connection closed", and shows the line to its operators only. The
server may not speak as the relay: a notification of that logger on its stdout is dropped.

Of the server's lines only what the gateway reads passes: answers to its requests and the server's own requests,
each within a rate no honest server reaches, and `tools/list_changed`, at most one a second (one held back goes
out before the server's next line past that second; the gateway also lists again periodically). Logging, progress
and every other notification are dropped here: the gateway reads none of them, and a server flooding them kept the
gateway's SDK parsing all day (70-96% of a core, its calls 20 times slower).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from toolrag.limits import TokenBucket
from toolrag.mcp.bounds import EDGE, REFUSED, MessageBounds, request_id

_CHUNK = 65536
RELAY_LOGGER = "toolrag.relay"  # the logger of the relay's own last message: how the server exited
_LAST_LINE = 240  # bytes of the server's last stderr line kept (its end: where an exception's message is)


def relay(command: list[str], max_bytes: int, out: int, bounds: MessageBounds | None = None) -> int:
    """Run `command`, copying its stdout to the file descriptor `out` with lines bounded; its exit status."""
    try:
        server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:  # one line on the server's stderr, as a shell says it, not the relay's traceback
        found = isinstance(exc, FileNotFoundError)
        print(f"command not found: {command[0]}" if found else f"{command[0]}: {exc.strerror}", file=sys.stderr)
        return 127 if found else 126
    assert server.stdout is not None and server.stderr is not None
    errors = _StderrTail(server.stderr.fileno())
    copier = threading.Thread(target=errors.copy, daemon=True)
    copier.start()
    line, lines = _Line(), _ServerLines()
    while chunk := os.read(server.stdout.fileno(), _CHUNK):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            line.add(chunk[start:end], max_bytes)
            _write(out, lines.passed(line.finished(max_bytes, bounds)))
            line, start = _Line(), end + 1
        line.add(chunk[start:], max_bytes)
    status = server.wait()
    copier.join(timeout=1.0)
    if status != 0:
        last = errors.last_line()
        ended = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        params = {"level": "error", "logger": RELAY_LOGGER, "data": {"ended": ended, "output": last}}
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
        with contextlib.suppress(OSError):  # the gateway is gone: nobody to tell
            _write(out, json.dumps(note).encode() + b"\n")
    return status


LIST_CHANGED = "notifications/tools/list_changed"
LIST_CHANGED_SECONDS = 1.0  # between two list_changed passed on: the gateway lists again at most once a second
_LIST_CHANGED_LINE = json.dumps({"jsonrpc": "2.0", "method": LIST_CHANGED}).encode() + b"\n"


# What an honest server never exceeds: its own requests (ping, sampling) are rare, and its answers follow the
# gateway's calls. Past them a flood costs the gateway's SDK parsing, a task and an answer each (20,000 pings: 3 s).
SERVER_REQUESTS_PER_SECOND, SERVER_REQUESTS_BURST = 2.0, 20.0
ANSWERS_PER_SECOND, ANSWERS_BURST = 5000.0, 20000.0  # 10 to 100 times what calls through one connection reach


class _ServerLines:
    """What of a server's line reaches the gateway: requests and answers as they came, within their rates (the
    rest dropped), `tools/list_changed` at most once in LIST_CHANGED_SECONDS (one held back goes out before the next
    line after them), and nothing else: every other notification, an answer to no request (an id that is neither a
    number nor a string) and a line that is no JSON object are dropped. Each line is parsed as the gateway's SDK
    reads it, so no spelling of a notification (an `"id": null`, an escaped method name) passes for something
    else."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.changed_at = -LIST_CHANGED_SECONDS
        self.held = False
        now = clock()
        self.rates = {  # kind: (its bucket, rate a second, burst)
            "request": (TokenBucket(SERVER_REQUESTS_BURST, now), SERVER_REQUESTS_PER_SECOND, SERVER_REQUESTS_BURST),
            "answer": (TokenBucket(ANSWERS_BURST, now), ANSWERS_PER_SECOND, ANSWERS_BURST),
        }

    def passed(self, line: bytes) -> bytes:
        now = self.clock()
        due = self.held and now - self.changed_at >= LIST_CHANGED_SECONDS
        before = _LIST_CHANGED_LINE if due else b""
        if due:
            self.changed_at, self.held = now, False
        kind = _kind(line) if line else "dropped"
        if kind in self.rates:
            bucket, rate, burst = self.rates[kind]
            return before + (line if bucket.take(now, rate, burst) == 0.0 else b"")
        if kind == "dropped":
            return before
        if before or now - self.changed_at < LIST_CHANGED_SECONDS:
            self.held = not before
            return before
        self.changed_at = now
        return line


def _kind(line: bytes) -> str:
    """ "request" (of the server's own), "answer" (to a request), "list_changed", or "dropped" (anything else), as the
    SDK tells messages apart: a method with a number or string id is a request, a method without one a
    notification."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return "dropped"
    if not isinstance(message, dict):
        return "dropped"
    identified = isinstance(message.get("id"), int | str) and not isinstance(message.get("id"), bool)
    method = message.get("method")
    if identified:
        return "answer" if method is None else "request"
    return "list_changed" if method == LIST_CHANGED else "dropped"


def _own_stderr() -> int | None:
    """The relay's stderr, None when it has none (a gateway started with its stderr closed, or by pythonw)."""
    try:
        return sys.stderr.fileno() if sys.stderr is not None else None
    except (AttributeError, ValueError, OSError):
        return None


class _StderrTail:
    """Copies the server's stderr to the relay's own as it comes, keeping the end of its last non-empty line."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.current = b""  # the end of the line being written
        self.last = b""  # the end of the last non-empty line finished

    def copy(self) -> None:
        """Drains the pipe to its end, whatever becomes of the relay's own stderr (closed, never opened)."""
        target = _own_stderr()
        while True:
            try:
                chunk = os.read(self.fd, _CHUNK)
            except OSError:
                return
            if not chunk:
                return
            if target is not None:
                try:
                    _write(target, chunk)
                except OSError:  # nobody reads the relay's stderr any more: keep draining, and the tail
                    target = None
            self._keep(chunk)

    def _keep(self, chunk: bytes) -> None:
        *finished, self.current = (self.current + chunk).split(b"\n")
        for done in reversed(finished):
            if done.strip():
                self.last = done[-_LAST_LINE:]
                break
        self.current = self.current[-_LAST_LINE:]

    def last_line(self) -> str:
        line = self.current if self.current.strip() else self.last
        text = line.decode("utf-8", "replace")
        return "".join(c if c.isprintable() else " " for c in text).strip()


class _Line:
    """The line being read: its bytes while under the cap, its first and last bytes always."""

    def __init__(self) -> None:
        self.kept: list[bytes] | None = []
        self.size = 0
        self.head = self.tail = b""

    def add(self, part: bytes, max_bytes: int) -> None:
        if len(self.head) < EDGE:
            self.head += part[: EDGE - len(self.head)]
        self.tail = (self.tail + part)[-EDGE:]
        self.size += len(part)
        if self.kept is not None and self.size <= max_bytes:
            self.kept.append(part)
        else:
            self.kept = None  # past the cap: from now on only its ends are kept

    def finished(self, max_bytes: int, bounds: MessageBounds | None) -> bytes:
        if self.kept is None:
            return _refusal(self.head, self.tail, self.size, max_bytes)
        message = b"".join(self.kept)
        refused = bounds.refusal(message) if bounds is not None else None
        if refused is not None:
            return refused + b"\n" if refused else b""
        return message + b"\n"


def _refusal(head: bytes, tail: bytes, size: int, max_bytes: int) -> bytes:
    """The JSON-RPC error that answers the skipped message's request, or nothing for a notification."""
    found = request_id(head, tail)
    if found is None:
        return b""
    message = (
        f"the MCP server's answer of {size:,} bytes is over the gateway's limit of {max_bytes:,} bytes for one message"
        " (max_result_bytes): ask for less (a filter, a page, a range)"
    )
    error = {"jsonrpc": "2.0", "id": found, "error": {"code": REFUSED, "message": message}}
    return json.dumps(error).encode() + b"\n"


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_OPTIONS = ("--max-bytes", "--max-depth", "--max-parts", "--max-tools")


def main(argv: list[str]) -> int:
    split = argv.index("--") if "--" in argv else len(argv)
    options, command = argv[:split], argv[split + 1 :]
    given = dict(zip(options[::2], options[1::2], strict=False))
    if not command or len(options) % 2 or not given.keys() <= set(_OPTIONS) or "--max-bytes" not in given:
        usage = " ".join(f"[{option} N]" for option in _OPTIONS[1:])
        print(f"usage: python -m toolrag.mcp.relay --max-bytes N {usage} -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    limits = {option: int(value) for option, value in given.items()}
    bounds = None
    if {"--max-depth", "--max-parts", "--max-tools"} <= limits.keys():
        bounds = MessageBounds(limits["--max-depth"], limits["--max-parts"], limits["--max-tools"])
    return relay(command, limits["--max-bytes"], sys.stdout.fileno(), bounds)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
