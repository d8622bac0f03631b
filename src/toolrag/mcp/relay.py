"""A relay between the gateway and a stdio MCP server that stops reading a message at the size cap.

The MCP SDK's stdio client reads a whole line before parsing it, and joins its chunks in a way that grows with the
square of the line's length: a hostile server's 20 MB result took 9 s of the gateway's CPU before it was refused.
The gateway starts each stdio upstream under this relay instead: the server's stdin and stderr are its own, its
stdout passes through here in linear time, line by line, and a line past `--max-bytes` is not buffered but skipped
to its end; the request it answered gets a JSON-RPC error saying why (its id is read from the line's first or last
bytes, wherever the server's serializer put it), so the call fails at once and the connection stays up. A line
under the cap is checked against the other bounds of one message (nesting, content parts, tools in a page:
mcp/bounds.py) here, in the relay's process, before the gateway's SDK parses it.

    python -m toolrag.mcp.relay --max-bytes 4194304 --max-depth 64 --max-parts 1000 --max-tools 2000 -- COMMAND ...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from toolrag.mcp.bounds import EDGE, REFUSED, MessageBounds, request_id

_CHUNK = 65536


def relay(command: list[str], max_bytes: int, out: int, bounds: MessageBounds | None = None) -> int:
    """Run `command`, copying its stdout to the file descriptor `out` with lines bounded; its exit status."""
    try:
        server = subprocess.Popen(command, stdout=subprocess.PIPE)
    except OSError as exc:  # one line on the server's stderr, as a shell says it, not the relay's traceback
        found = isinstance(exc, FileNotFoundError)
        print(f"command not found: {command[0]}" if found else f"{command[0]}: {exc.strerror}", file=sys.stderr)
        return 127 if found else 126
    assert server.stdout is not None
    line = _Line()
    while chunk := os.read(server.stdout.fileno(), _CHUNK):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            line.add(chunk[start:end], max_bytes)
            _write(out, line.finished(max_bytes, bounds))
            line, start = _Line(), end + 1
        line.add(chunk[start:], max_bytes)
    return server.wait()


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
