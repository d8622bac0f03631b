"""One of several processes sharing a registry (run by test_shared_registry.py): writes its own tools, edits one
shared tool, searches the others' tools, and prints what it saw as JSON."""

from __future__ import annotations

import json
import sys
import time

from toolrag import Tool, ToolRegistry

TOPICS = ["volcano", "lighthouse", "saxophone", "glacier", "origami", "tapestry", "meteorite", "beekeeping"]


def own_tool(worker: int, number: int) -> Tool:
    topic = TOPICS[(worker * 3 + number) % len(TOPICS)]
    return Tool.parse(
        {"name": f"w{worker}.tool{number}", "description": f"Worker {worker} tool {number} about {topic}."}
    )


def main(url: str, worker: int, workers: int, per_worker: int) -> None:
    registry = ToolRegistry(url, "use")
    shared = registry.get("shared.notes")
    for number in range(per_worker):
        registry.register_many([own_tool(worker, number)])
        # Every worker rewrites the same tool each round: no rewrite may be lost.
        registry.register_many(
            [shared.model_copy(update={"description": f"Notes, edited by {worker} round {number}."})]
        )
        registry.search(f"tool {number} of worker {(worker + 1) % workers}")
    expected = workers * per_worker + 1
    deadline = time.monotonic() + 60
    while len(registry.tools()) < expected and time.monotonic() < deadline:
        time.sleep(0.1)
    others = [own_tool(other, per_worker - 1) for other in range(workers) if other != worker]
    found = {tool.name: [r.name for r in registry.rank(tool.description, limit=3)] for tool in others}
    print(json.dumps({"tools": len(registry.tools()), "found": found, "generation": registry.generation}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
