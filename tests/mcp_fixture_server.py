"""A small MCP server (official SDK, stdio) whose tool list the tests can change while it runs.

The description of `lookup_order` is read from $FIXTURE_DESCRIPTION_FILE at every `tools/list`, so a test can
rewrite it as a compromised upstream would; `add_tool` adds a tool and sends `tools/list_changed`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

ADDED: list[types.Tool] = []


def description() -> str:
    path = os.environ.get("FIXTURE_DESCRIPTION_FILE")
    if path and Path(path).exists():
        return Path(path).read_text(encoding="utf-8")
    return "Look up an order by its number: status, items and delivery date."


def listed() -> list[types.Tool]:
    order = types.Tool(
        name="lookup_order",
        description=description(),
        input_schema={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    )
    adder = types.Tool(
        name="add_tool",
        description="Add a tool to this server's list (for tests of tools/list_changed).",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "description": {"type": "string"}},
            "required": ["name", "description"],
        },
    )
    repeat = types.Tool(
        name="repeat",
        description="Repeat a text a number of times (for tests of the size limit of results).",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}, "times": {"type": "integer"}},
            "required": ["text", "times"],
        },
    )
    wait = types.Tool(
        name="wait",
        description="Wait a number of seconds, then answer (for tests of call timeouts).",
        input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
    )
    hostile = [types.Tool(name=name, description=text, input_schema=schema) for name, text, schema in HOSTILE_TOOLS]
    return [order, adder, repeat, wait, *ADDED, *(hostile if os.environ.get("FIXTURE_HOSTILE") else [])]


def anyof_chain(depth: int) -> dict[str, Any]:
    """A schema of `depth` anyOfs whose two branches refer to the next level: 2^depth subschemas for one value
    (issue 31, section 1; registration refuses it past the cost limit, validation.MAX_STEPS_PER_VALUE)."""
    levels = {f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}] * 2} for i in range(depth)}
    levels[f"a{depth}"] = {"type": "integer"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": levels}


# Tools whose schemas set the cost of checking a call (issue 31, section 1), each as large as registration allows:
# references that multiply, a long enum, uniqueItems over objects, a pattern with a large automaton.
COST_TOOLS = [
    ("refs", "Record a nested code.", anyof_chain(11)),
    (
        "pick",
        "Pick values from the catalogue.",
        {"type": "object", "properties": {"xs": {"type": "array", "items": {"enum": [f"v{i}" for i in range(5000)]}}}},
    ),
    (
        "distinct",
        "Store distinct records.",
        {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True, "items": {"type": "object"}}}},
    ),
    (
        "automaton",
        "Match a long code.",
        {"type": "object", "properties": {"code": {"type": "string", "pattern": "(?:(?:a|b|ab|ba){1,30}){1,10}c"}}},
    ),
]

# Tools whose schemas made a call's checking cost seconds (issue 25, findings 2, 4, 16): a catastrophic pattern, an
# argument whose errors were rendered whole, and room for 100,000 values; and those of issue 31 (COST_TOOLS).
HOSTILE_TOOLS = [
    (
        "match",
        "Match a code against the catalogue's format.",
        {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}, "required": ["code"]},
    ),
    (
        "label",
        "Label a record with one of its fields.",
        {
            "type": "object",
            "properties": {"field": {"type": "string"}, "values": {"type": "array", "items": {"type": "string"}}},
        },
    ),
    *COST_TOOLS,
]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=listed())


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == "lookup_order":
        text = f"order {arguments['order_id']}: shipped, arrives Friday"
    elif params.name == "add_tool":
        ADDED.append(
            types.Tool(name=arguments["name"], description=arguments["description"], input_schema={"type": "object"})
        )
        await ctx.session.send_tool_list_changed()
        text = f"added {arguments['name']}"
    elif params.name == "repeat":
        text = str(arguments["text"]) * int(arguments["times"])
    elif params.name == "wait":
        await anyio.sleep(float(arguments["seconds"]))
        text = "waited"
    elif params.name in ("match", "label", *(name for name, _, _ in COST_TOOLS)):
        text = f"{params.name}: done"
    elif any(tool.name == params.name for tool in ADDED):
        text = f"{params.name} ran"
    else:
        return types.CallToolResult(content=[types.TextContent(type="text", text="unknown tool")], is_error=True)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def main() -> None:
    server = Server("fixture", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(port: int) -> None:
    """The same server over streamable HTTP at http://127.0.0.1:PORT/mcp."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route

    sessions = StreamableHTTPSessionManager(Server("fixture", on_list_tools=list_tools, on_call_tool=call_tool))
    app = Starlette(routes=[Route("/mcp", StreamableHTTPASGIApp(sessions))], lifespan=lambda _: sessions.run())
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        serve_http(int(sys.argv[2]))
    else:
        anyio.run(main)
