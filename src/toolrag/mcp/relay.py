"""A relay between the gateway and a stdio MCP server that stops reading a message at the size cap.

The MCP SDK's stdio client reads a whole line before parsing it, and joins its chunks in a way that grows with the
square of the line's length: a hostile server's 20 MB result took 9 s of the gateway's CPU before it was refused.
The gateway starts each stdio upstream under this relay instead: the server's stdin and stderr are its own, its
stdout passes through here in linear time, line by line, and a line past `--max-bytes` is not buffered but skipped
to its end; the request it answered gets a JSON-RPC error saying why (its id is read from the line's first or last
bytes, wherever the server's serializer put it), so the call fails at once and the connection stays up.

    python -m toolrag.mcp.relay --max-bytes 4194304 -- COMMAND [ARGS...]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

_CHUNK = 65536
_EDGE = 512  # bytes kept from each end of a skipped line: where serializers write the message's id
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')


def relay(command: list[str], max_bytes: int, out: int) -> int:
    """Run `command`, copying its stdout to the file descriptor `out` with lines bounded; its exit status."""
    server = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert server.stdout is not None
    line = _Line()
    while chunk := os.read(server.stdout.fileno(), _CHUNK):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            line.add(chunk[start:end], max_bytes)
            _write(out, line.finished(max_bytes))
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
        if len(self.head) < _EDGE:
            self.head += part[: _EDGE - len(self.head)]
        self.tail = (self.tail + part)[-_EDGE:]
        self.size += len(part)
        if self.kept is not None and self.size <= max_bytes:
            self.kept.append(part)
        else:
            self.kept = None  # past the cap: from now on only its ends are kept

    def finished(self, max_bytes: int) -> bytes:
        if self.kept is not None:
            return b"".join(self.kept) + b"\n"
        return _refusal(self.head, self.tail, self.size, max_bytes)


def _refusal(head: bytes, tail: bytes, size: int, max_bytes: int) -> bytes:
    """The JSON-RPC error that answers the skipped message's request, or nothing for a notification."""
    found = _ID.search(head) or _ID.search(tail)
    if found is None:
        return b""
    message = (
        f"the MCP server's answer of {size:,} bytes is over the gateway's limit of {max_bytes:,} bytes for one message"
        " (max_result_bytes): ask for less (a filter, a page, a range)"
    )
    error = {"jsonrpc": "2.0", "id": json.loads(found.group(1)), "error": {"code": -32001, "message": message}}
    return json.dumps(error).encode() + b"\n"


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "--max-bytes" or argv[2] != "--":
        print("usage: python -m toolrag.mcp.relay --max-bytes N -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    return relay(argv[3:], int(argv[1]), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
