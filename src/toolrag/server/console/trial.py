"""Trying a tool from its console page: an admin picks a principal, writes the arguments, and the call runs through
the execution gateway as any agent's does (server/routes/execute.py: the permission check, argument validation
within its budgets, the admin token's call rate, the usage log: `Served.call`), logged as a console trial
(`CALL_ORIGIN`).

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

import contextlib
import json
import time
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from toolrag.access import Caller
from toolrag.errors import ToolNotFoundError
from toolrag.events import CALL_ORIGIN
from toolrag.jsontext import loads
from toolrag.model import Principal, Tool
from toolrag.server.console.common import Console, ConsoleState, Who, chosen_principal
from toolrag.server.served import Api, Served

MAX_ARGUMENT_CHARS = 100_000  # what the form accepts; the gateway's own budgets apply after it
MAX_SHOWN_CHARS = 20_000  # of a result on the page
TRIAL_SESSION = "console-trial"  # bound to the admin's token (`Caller.session`): one trial session per token

router = APIRouter()


@dataclass(frozen=True)
class Trial:
    """What one try gave: the gateway's outcome, what the model would have read, how long the call took."""

    outcome: str
    is_error: bool
    content: str
    latency_ms: float | None = None  # None: nothing was called (not a JSON object, the rate used up)
    hidden_from_principal: bool = False  # the gateway answered as for a tool that does not exist

    @property
    def status(self) -> int:
        """The page's status: the call's answer is the page's content; a try that called nothing is not."""
        if self.latency_ms is not None:
            return 200
        return 429 if self.outcome == "rate_limited" else 422

    @property
    def shown(self) -> str:
        """The content as the page shows it: JSON indented, cut at `MAX_SHOWN_CHARS`, saying how much was left out."""
        text = self.content
        with contextlib.suppress(json.JSONDecodeError):  # text that only looks like JSON is shown as it is
            text = json.dumps(loads(text), indent=2, ensure_ascii=False) if text[:1] in "{[" else text
        if len(text) <= MAX_SHOWN_CHARS:
            return text
        return f"{text[:MAX_SHOWN_CHARS]}\n… {len(text) - MAX_SHOWN_CHARS:,} more characters not shown"


@router.get("/tools/{name}/try")
def try_page(request: Request, console: Console, api: Api, who: Who, name: str) -> Response:
    if not who.is_admin:
        return console.error(request, 403, f"token {who.name!r} is {who.role}: only admins try tools")
    try:
        tool = console.registry.get(name)
    except ToolNotFoundError as missing:
        return console.error(request, 404, str(missing))
    return _page(request, console, api, tool, who.principal, argument_skeleton(tool.input_schema))


@router.post("/tools/{name}/try")
async def try_tool(
    request: Request,
    console: Console,
    api: Api,
    name: str,
    arguments: Annotated[str, Form(max_length=MAX_ARGUMENT_CHARS)] = "{}",
    user: Annotated[str, Form(max_length=200)] = "",
    tenant: Annotated[str, Form(max_length=200)] = "",
    scopes: Annotated[str, Form(max_length=2000)] = "",
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    who = console.admin(request, csrf)
    try:
        tool = await anyio.to_thread.run_sync(console.registry.get, name)
    except ToolNotFoundError as missing:
        return console.error(request, 404, str(missing))
    principal = chosen_principal(who, user.strip(), tenant.strip(), scopes)
    trial = await _tried(api, who, tool, principal, arguments)
    return _page(request, console, api, tool, principal, arguments, trial, trial.status)


async def _tried(api: Served, who: Caller, tool: Tool, principal: Principal, arguments: str) -> Trial:
    try:
        parsed = loads(arguments)
    except json.JSONDecodeError as exc:
        problem = f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
        return Trial("invalid_arguments", True, f"the arguments are not valid JSON: {problem}; nothing was called")
    if not isinstance(parsed, dict):
        return Trial("invalid_arguments", True, "the arguments must be a JSON object ({...}); nothing was called")
    try:
        api.within_rate(who, "call")  # the admin's own call rate: trying a tool is calling it
    except HTTPException as limited:
        return Trial("rate_limited", True, str(limited.detail))
    session = who.session(TRIAL_SESSION) or TRIAL_SESSION
    marked = CALL_ORIGIN.set("console")
    started = time.perf_counter()
    try:
        result = await api.call(tool.name, parsed, principal, session)
    finally:
        CALL_ORIGIN.reset(marked)
    latency = (time.perf_counter() - started) * 1000
    hidden = result.outcome == "unknown_tool" and not principal.can_use(tool)
    return Trial(result.outcome, result.is_error, result.content, latency, hidden)


def _page(
    request: Request,
    console: ConsoleState,
    api: Served,
    tool: Tool,
    principal: Principal,
    arguments: str,
    trial: Trial | None = None,
    status: int = 200,
) -> HTMLResponse:
    schema = json.dumps(tool.input_schema, indent=2, ensure_ascii=False)
    context = {"tool": tool, "schema": schema, "principal": principal, "arguments": arguments, "trial": trial}
    return console.page(request, "try.html", status, unrunnable=unrunnable(api, tool), **context)


def unrunnable(api: Served, tool: Tool) -> str | None:
    """Why this server cannot run the tool, or None when it can: MCP tools run on their upstreams when the API
    serves with `mcp_config` (and only they do then), other tools where their function is registered."""
    upstream = tool.source.removeprefix("mcp:") if tool.source.startswith("mcp:") else None
    if api.execute is not None:
        return None if upstream else "this API runs MCP tools only (it serves with mcp_config), and this is not one"
    if upstream:
        return (
            f"it is a tool of the MCP server {upstream!r}, and this API was started without mcp_config, so it has"
            " no connection to that server: serve the API with mcp_config to try it here"
        )
    if api.registry.function(tool.name) is None:
        return "its function is not registered in this server's process (a Python tool runs where it was registered)"
    return None


def argument_skeleton(schema: dict[str, Any]) -> str:
    """Arguments to start from: the schema's required parameters (all of them when none is required), each with
    its default, first allowed value, or an empty value of its type."""
    properties: dict[str, Any] = schema.get("properties") or {}
    required = [name for name in schema.get("required") or [] if name in properties]
    return json.dumps({name: _placeholder(properties[name]) for name in required or properties}, indent=2)


def _placeholder(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return None
    if "default" in spec:
        return spec["default"]
    if "const" in spec:
        return spec["const"]
    if spec.get("enum"):
        return spec["enum"][0]
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    empty: dict[Any, Any] = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}
    return empty.get(kind)
