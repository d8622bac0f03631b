"""The MCP gateway: many upstream MCP servers behind two tools, `find_tools` and `call_tool`.

Clients (Claude Desktop, IDEs, agents on any MCP SDK) connect over stdio or streamable HTTP. `find_tools` searches
the registry for the caller's principal and returns capability cards with full input schemas; `call_tool` goes
through the runtime's execution gateway (authorization, name resolution, schema validation, timeout) and is
forwarded to the upstream that owns the tool. Over HTTP every request needs a configured bearer token.

Clients of MCP 2026-07-28 (no `initialize`, no sessions: each request carries its version and capabilities in
`_meta`) and of 2025-11-25 are served alike. What `find_tools` offered is remembered per conversation, not per
protocol session (mcp/conversations.py); tool lists are private to the caller (`cacheScope`, `ttlMs`), in a fixed
order, and a caller listening for `toolsListChanged` hears when what it sees changes (mcp/listen.py).
"""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from toolrag import __version__, tracing
from toolrag.access import Caller
from toolrag.access.guard import CALLER_KEY, server_config
from toolrag.access.rate_limit import Kind, RateLimiter, retry_after
from toolrag.events import CALL_ORIGIN, Event, EventSink, FanoutSink, Outcome, SecurityEvent, ToolCallEvent
from toolrag.inject.formats import render
from toolrag.inject.told import NO_TOOL_AVAILABLE
from toolrag.limits import MAX_MESSAGE_CHARS
from toolrag.mcp.audit import BoundedAudit
from toolrag.mcp.config import GatewayConfig
from toolrag.mcp.conversations import Conversations, given_conversation
from toolrag.mcp.http import http_app
from toolrag.mcp.importer import SOURCE_PREFIX, SyncReport, ToolImporter, split_name
from toolrag.mcp.listen import ListChanges
from toolrag.mcp.results import ResultCheck
from toolrag.mcp.seen import UpstreamsSeen
from toolrag.mcp.upstream import UpstreamCallFailed, UpstreamPool, UpstreamStatus
from toolrag.model import Principal, SearchResult
from toolrag.monitor.schedule import Scheduler
from toolrag.monitor.startup import StartupCheck, check_at_startup
from toolrag.registry import ToolRegistry
from toolrag.runtime.gateway import ExecutionPolicy, ToolGateway, permitted_tools
from toolrag.runtime.messages import ToolCall
from toolrag.search.request import searched_text
from toolrag.store.base import AuditEntry

PROTOCOL_SESSION_HEADER = "mcp-session-id"  # the streamable HTTP transport's session of protocol 2025-11-25
log = logging.getLogger("toolrag.mcp")
SCORE_META_KEY = "toolrag/score"
NEEDED_META_KEY = "toolrag/needed"
ALSO_NEEDS_META_KEY = "toolrag/alsoNeeds"  # what the tool requires that did not fit the set: to ask for by name

FIND_TOOLS = types.Tool(
    name="find_tools",
    description=(
        "Search the tools available to you by what you want to do. Returns the best matching tools as MCP tool "
        "definitions (name, description, inputSchema); then run one with call_tool. Search again with other words "
        "if none fits. A tool's exact name, or a name prefix ending in * (server.*), returns those tools directly."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "what you want to do, in a sentence; or a tool's name, or a prefix such as `shop.*`",
                "maxLength": MAX_MESSAGE_CHARS,
            },
            "k": {
                "type": "integer",
                "minimum": 1,
                "maximum": 5,
                "description": "how many tools at most for each step of the task",
            },
        },
        "required": ["query"],
    },
)
CALL_TOOL = types.Tool(
    name="call_tool",
    description="Run a tool that find_tools returned, by its name, with arguments that follow its input schema.",
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the tool's name as find_tools gave it"},
            "arguments": {"type": "object", "description": "the tool's arguments"},
        },
        "required": ["name"],
    },
)


class AuditSink:
    """Writes refused calls (a principal asking for a tool it may not use) to the registry's audit log, within its
    bound (`audit`, mcp/audit.py; the gateway's result checks write through it too)."""

    def __init__(self, registry: ToolRegistry, clock: Callable[[], float] = time.monotonic) -> None:
        self.audit = BoundedAudit(registry.store.audit, clock)

    def emit(self, event: Event) -> None:
        if isinstance(event, SecurityEvent):
            server = split_name(event.tool)[0]
            self.audit([AuditEntry("refused", event.reason, event.tool, server, event.user)])


@dataclass
class McpGateway:
    """The gateway's state: registry, importer, upstream connections, and one execution gateway per principal."""

    settings: GatewayConfig
    registry: ToolRegistry
    reports: dict[str, SyncReport] = field(default_factory=dict)  # what each server's syncs did, merged

    def __post_init__(self) -> None:
        self.importer = ToolImporter(self.registry, self.settings)
        self.pool = UpstreamPool(self.settings, self._on_tools)
        self._gateways: dict[tuple[object, ...], ToolGateway] = {}
        settings = self.settings
        self.conversations = Conversations(
            settings.conversation_idle_seconds,
            settings.max_conversations_per_principal,
            settings.max_conversation_callers,
        )
        self.list_changes = ListChanges(
            self.registry.visible_tools,
            lambda: self.registry.generation,
            settings.max_listen_streams,
            settings.max_listen_streams_per_principal,
        )
        self.startup: StartupCheck | None = None  # what the check before serving found
        # The scheduled jobs of [schedule] (monitor/schedule.py), run while serving.
        servers = set(self.settings.enabled_servers)
        self.scheduler = Scheduler(self.registry, self.settings.schedule, mcp_servers=servers)
        self.limiter = RateLimiter(self.settings.rate_limits)
        self.audit_sink = audit = AuditSink(self.registry)
        self.results = ResultCheck(
            settings.max_result_bytes,
            settings.scan_results,
            audit.audit,
            settings.max_scanned_result_chars,
        )
        self.ready = anyio.Event()  # set once every upstream is imported or has failed (or the start deadline passed)
        self.seen = UpstreamsSeen(self.registry, self.settings)  # which upstreams a caller is shown
        if not self.settings.enabled_servers:
            self.ready.set()  # nothing to wait for
        self._events: EventSink = FanoutSink(audit, self.registry.usage) if self.registry.usage else audit

    @classmethod
    def from_config(cls, settings: GatewayConfig) -> McpGateway:
        return cls(settings, ToolRegistry(settings.store, settings.embedder, monitor=settings.monitor))

    async def _on_tools(self, server: str, tools: list[types.Tool], instructions: str | None) -> None:
        report = await anyio.to_thread.run_sync(self.importer.apply, server, tools, instructions)
        self.reports[server] = self.reports[server].merged(report) if server in self.reports else report
        if report.unscanned or report.deferred:  # a budget ran out: the next listing imports (and scans) again
            self.pool.upstreams[server].import_again()
        await self._tell_listeners()
        log.info(
            "%s: %d imported, %d unchanged, %d quarantined, %d deactivated, %d refused, %d left for the next sync",
            server,
            len(report.imported),
            len(report.unchanged),
            len(report.quarantined),
            len(report.deactivated),
            len(report.refused),
            len(report.deferred) + len(report.unscanned),
        )

    def check(self) -> StartupCheck:
        """The registry's check before serving (monitor/startup.py): raises StartupRefused when it may not serve."""
        servers = set(self.settings.enabled_servers)
        self.startup = check_at_startup(self.registry, self.settings.startup.missing_embeddings, servers)
        return self.startup

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Deactivate tools of servers no longer configured, connect every upstream, and wait until each is imported
        or has failed (at most `start_deadline_seconds`); then the gateway is ready."""
        await anyio.to_thread.run_sync(self.importer.forget_servers, list(self.settings.enabled_servers))
        await self.pool.run(task_group)
        await self.pool.wait_attempted(self.settings.start_deadline_seconds)
        self.ready.set()

    async def _tell_listeners(self) -> None:
        if self.list_changes.open:
            await self.list_changes.check()

    async def watch_visible(self) -> None:
        """While serving: changes made by other processes (`toolrag mcp approve`, the console) reach listening
        clients too, checked every `ping_interval_seconds` while anyone listens."""
        seen = None
        while True:
            await anyio.sleep(self.settings.ping_interval_seconds)
            if not self.list_changes.open:
                continue
            generation = await anyio.to_thread.run_sync(lambda: self.registry.generation)
            if generation != seen:
                seen = generation
                await self.list_changes.check()

    async def _until_ready(self) -> None:
        """Searches and calls wait for the first imports: an agent's first question after the gateway starts (the
        usual case for desktop clients, which start it per session) gets the tools, not "no tool fits"."""
        with anyio.move_on_after(self.settings.start_deadline_seconds):
            await self.ready.wait()

    # -- servers switched off (`toolrag mcp disable`) -----------------------------------------------------------

    def disabled_refusal(self, name: str, principal: Principal | None = None) -> str | None:
        """Why a call to `name` is refused when its server is switched off, else None. Given the caller's
        principal, only for a tool of that name it may use: anyone else learns nothing of the switch (its call is
        refused as any hidden tool's, by the served principal). Fixed words: who switched the server off and why
        are free text an admin wrote, for operators (the audit log, `toolrag mcp list-servers`, the console, the
        admin API), never for the agent's model (issue 48, R4-8)."""
        switch = self.registry.disabled_servers().get(split_name(name)[0])
        if switch is None or (principal is not None and not self._may_use(principal, name)):
            return None
        return (
            f"this tool is disabled: MCP server {switch.server!r} is switched off since"
            f" {switch.disabled_at:%Y-%m-%d %H:%M} UTC; its tools are not run until an operator enables it"
        )

    def _may_use(self, principal: Principal, name: str) -> bool:
        index = self.registry.snapshot()
        position = index.position_of(name)
        return position is not None and principal.can_use(index.tools[position])

    # -- the two tools ------------------------------------------------------------------------------------------

    def find_tools(
        self, query: str, principal: Principal, k: int | None = None, session: str | None = None
    ) -> dict[str, Any]:
        principal = self.registry.served_as(principal)
        named, matched = self.registry.named(query, principal, k or self.settings.find_k, session)
        # The client's k wins; without it, the whole catalog when it fits the budget, else find_k.
        searched_k = k or (None if self.registry.retriever.serves_all(principal) else self.settings.find_k)
        results = named or self.registry.search(query, principal, searched_k, session)
        offered = self.conversations.offered(principal.caller, session) if session is not None else set()
        again = _offered_again(results, offered) or best_offered(self.registry, query, principal, results, offered)
        if session is not None:  # what the model was shown, so the usage log knows whether a call was offered
            self.conversations.offer(principal.caller, session, [r.name for r in results])
        definitions = {d["name"]: d for d in self.registry.schemas([r.name for r in results], principal, fmt="mcp")}
        waiting = self.not_ready_for(principal)
        answer: dict[str, Any] = {
            "tools": [as_mcp_tool(definitions[r.name], r.score, r.needed_as(), r.signals.also_needs) for r in results],
            "strategy": "name" if named else results[0].strategy if results else "retrieval",
            "next": _named_step(query, named, matched) if named else _next_step(results),
            # What a client may cache, and for whom (SEP-2549's fields, as on tool lists): this caller only.
            "ttlMs": self.list_ttl_ms,
            "cacheScope": "private",
        }
        if again:  # weaker models loop on "no tool fits" or on a list they already have
            answer["next"] = (
                f"already available: call {' or '.join(again)} directly with call_tool(name, arguments) (find_tools"
                f" offered {'it' if len(again) == 1 else 'them'} earlier in this conversation); search again with"
                " other words for another tool"
            )
        if waiting:
            answer["not_ready"] = [_status_json(status) for status in waiting]
            if not results and not again:
                answer["next"] = f"no tool fits yet: {_waiting_text(waiting)}; search again in a moment"
        note = searched_text(query, self.registry.config.max_request_chars).note
        return answer | ({"note": note} if note else {})

    @property
    def list_ttl_ms(self) -> int:
        return round(self.settings.list_ttl_seconds * 1000)

    def health(self, caller: Caller) -> dict[str, Any]:
        """The upstreams a caller may use (an admin: all), each with its state, since when, its tools and its last
        import; `ready` once every one of them is up."""
        seen = None if caller.is_admin else self.seen.of(caller.principal)
        shown = [s for s in self.pool.statuses() if seen is None or s.name in seen]
        disabled = self.registry.disabled_servers()
        told = self.registry.disabled_servers_seen(caller.principal, caller.is_admin)
        servers = [
            _status_json(status)
            | ({"error": status.operators_error} if caller.is_admin and status.error_output else {})
            | {"tools": status.tools if seen is None else seen[status.name], "reconnects": status.reconnects}
            | ({"disabled": True} if status.name in told else {})
            | ({"last_import": status.last_import.isoformat(timespec="seconds")} if status.last_import else {})
            for status in shown
        ]
        ready = self.ready.is_set() and all(status.ready or status.name in disabled for status in shown)
        schedule = self.scheduler.health().shown(caller.is_admin)
        return {"status": "ok", "ready": ready, "servers": servers, "schedule": schedule}

    def not_ready_for(self, principal: Principal) -> list[UpstreamStatus]:
        """The upstreams whose tools the principal may use and that are not imported and connected now (a disabled
        server is not waited for)."""
        disabled = self.registry.disabled_servers()
        return [
            status
            for status in self.pool.not_ready()
            if principal.may_name(f"{status.name}.") and status.name not in disabled
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], principal: Principal, session: str | None = None
    ) -> types.CallToolResult:
        return (await self.call_with_outcome(name, arguments, principal, session))[0]

    async def call_with_outcome(
        self, name: str, arguments: dict[str, Any], principal: Principal, session: str | None = None
    ) -> tuple[types.CallToolResult, Outcome]:
        """`call_tool`'s answer and the gateway's outcome (the API's /execute and the console report it)."""
        refusal = await anyio.to_thread.run_sync(self.disabled_refusal, name, principal)
        if refusal is not None:  # denied before anything resolves or runs, and logged as refused
            offered = self.conversations.offered(principal.caller, session) if session is not None else set()
            self._events.emit(_refused_call(name, arguments, principal, session, name in offered, refusal))
            return _error(refusal), "refused"
        principal = await anyio.to_thread.run_sync(self.registry.served_as, principal)
        gateway = self._gateway_for(principal)
        call = ToolCall(id=uuid.uuid4().hex, name=name, arguments=json.dumps(arguments))
        offered = self.conversations.offered(principal.caller, session) if session is not None else set()
        result = await gateway.call(call, offered, session)
        if result.outcome == "ok" and isinstance(result.value, types.CallToolResult):
            return result.value, result.outcome
        text = result.message.content
        waiting = self.not_ready_for(principal) if result.outcome == "unknown_tool" else []
        if waiting:
            text += f" ({_waiting_text(waiting)}: its tools may appear shortly)"
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
        return types.CallToolResult(content=content, is_error=result.message.is_error), result.outcome

    def _gateway_for(self, principal: Principal) -> ToolGateway:
        key = (self.registry.generation, principal.visibility_key, principal.user, principal.caller)
        gateway = self._gateways.get(key)
        if gateway is None:
            if len(self._gateways) > 256:
                self._gateways.clear()
            policy = ExecutionPolicy(timeout_seconds=self.settings.call_timeout_seconds + 1)
            permitted = permitted_tools(self.registry, principal, policy.fuzzy_cutoff)
            gateway = ToolGateway(permitted, (), principal, self._forwarder, policy=policy, events=self._events)
            self._gateways[key] = gateway
        return gateway

    def _forwarder(self, name: str) -> Callable[..., Awaitable[types.CallToolResult]] | None:
        index = self.registry.snapshot()  # the in-memory index, not a database read on every call
        position = index.position_of(name)
        if position is None or not index.tools[position].source.startswith(SOURCE_PREFIX):
            return None

        async def forward(**arguments: Any) -> types.CallToolResult:
            return await self._forward(name, arguments)

        return forward

    async def _forward(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        server, tool = split_name(name)
        refusal = await anyio.to_thread.run_sync(self.disabled_refusal, name)
        if refusal is not None:  # switched off between resolving and running: still never run
            raise UpstreamCallFailed(refusal)
        upstream = self.settings.servers.get(server)
        transport = None if upstream is None else "pipe" if upstream.transport == "stdio" else "tcp"
        conventions = {"mcp.method.name": "tools/call", "gen_ai.tool.name": tool, "network.transport": transport}
        with tracing.span(f"tools/call {tool}", kind="client", server=server, tool=tool, **conventions):
            result = await self.pool.call(server, tool, arguments)
        # Serializing for the size check and scanning are work in proportion to the result: not on the loop.
        return await anyio.to_thread.run_sync(self.results.inspected, name, result)

    # -- the MCP server -----------------------------------------------------------------------------------------

    def mcp_server(self, caller_of: Callable[[Any], Caller]) -> Server[Any]:
        """The downstream MCP server; `caller_of(request)` names the caller (request is None over stdio)."""

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            caller = caller_of(ctx.request)
            if self.settings.expose:
                await self._until_ready()  # the exposed tools are listed once they are imported
            exposed = exposed_tools(self.settings, self.registry, caller.principal) if caller.may("agent") else []
            # The list depends on who asks: no cache may hand it to another caller (SEP-2549).
            tools = [FIND_TOOLS, CALL_TOOL, *exposed]
            return types.ListToolsResult(tools=tools, ttl_ms=self.list_ttl_ms, cache_scope="private")

        async def listen(ctx: Any, params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
            caller = caller_of(ctx.request)
            if not caller.granted:
                raise MCPError(types.INVALID_REQUEST, _refusal(caller, "search") or "not granted")
            return await self.list_changes.listen(ctx, params, caller.principal)

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            request_id = tracing.REQUEST_ID.set(uuid.uuid4().hex)
            try:
                caller = caller_of(ctx.request)
                conversation = self._conversation_of(ctx, caller)
                executed, arguments = _executed(params)
                attributes = {
                    "gen_ai.tool.call.id": None if ctx.request_id is None else str(ctx.request_id),
                    "gen_ai.conversation.id": conversation,
                    "mcp.method.name": "tools/call",
                    "tool": params.name[:128],
                    "user": caller.principal.user,
                }
                with (
                    tracing.continued(ctx.meta),
                    tracing.execute_tool(span_tool(self.registry, executed), arguments, **attributes) as span,
                ):
                    result = await answer(params, caller, conversation)
                    _record_outcome(span, params.name, result)
                    return result
            finally:
                tracing.REQUEST_ID.reset(request_id)

        async def answer(params: types.CallToolRequestParams, caller: Caller, session: str) -> types.CallToolResult:
            arguments = dict(params.arguments or {})
            kind: Kind = "search" if params.name == "find_tools" else "call"
            refusal = _refusal(caller, kind)
            if refusal is not None:
                return _error(refusal)
            principal = caller.principal
            await self._until_ready()
            wait = self.limiter.wait(principal, kind)
            if wait > 0:
                return _error(f"rate limit: your {kind} rate is used up; retry in {retry_after(wait)} s")
            if params.name == "find_tools":
                return await self._answer_find(arguments, principal, session)
            if params.name == "call_tool":
                target = arguments.get("name")
                if not isinstance(target, str) or not target:
                    return _error("call_tool needs `name`: the tool's name as find_tools gave it")
                inner = arguments.get("arguments") or {}
                if not isinstance(inner, dict):
                    return _error("call_tool's `arguments` must be an object")
                return await self.call_tool(target, inner, principal, session)
            if params.name in self.settings.expose:
                return await self.call_tool(params.name, arguments, principal, session)
            return _error(f"no tool named {params.name!r}: use find_tools, then call_tool")

        server = Server("toolrag-gateway", version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)
        server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams, listen)
        return server

    def _conversation_of(self, ctx: Any, caller: Caller) -> str:
        """The conversation a request belongs to, bound to its caller: the one it names (`_meta`, or the HTTP
        header), else the caller's default conversation. Never the protocol session: 2026-07-28 has none."""
        headers = getattr(ctx.request, "headers", None)
        given = given_conversation(ctx.meta, headers)
        if given is None:
            # A 2025-11-25 client over streamable HTTP has a protocol session: each is a conversation of its own
            # (two sessions of one token are two agents, not one); only a client that sends neither shares the
            # caller's default conversation.
            protocol = headers.get(PROTOCOL_SESSION_HEADER) if headers is not None else None
            if not isinstance(protocol, str) or not protocol:
                return self.conversations.default_id(caller.principal.caller)
            given = f"mcp-session:{protocol}"
        return caller.session(given) or given

    async def _answer_find(self, arguments: dict[str, Any], principal: Principal, session: str) -> types.CallToolResult:
        query = arguments.get("query")
        k = arguments.get("k")
        if not isinstance(query, str) or not query.strip():
            return _error("find_tools needs `query`: what you want to do, in a sentence")
        if len(query) > MAX_MESSAGE_CHARS:
            return _error(
                f"find_tools' `query` is {len(query):,} characters long; it takes at most {MAX_MESSAGE_CHARS:,}"
            )
        if k is not None and (not isinstance(k, int) or not 1 <= k <= 5):
            return _error("find_tools' `k` must be an integer from 1 to 5")
        found = await anyio.to_thread.run_sync(self.find_tools, query, principal, k, session)
        text = json.dumps(found, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=found)

    async def serve_stdio(self) -> None:
        if self.startup is None:
            self.check()
        local = self.settings.policy().local()
        if not local.granted:
            log.warning("no local_principal is configured: stdio clients may find and call no tool")
        server = self.mcp_server(lambda request: local)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self.scheduler.run)
                group.start_soon(self.start, group)  # clients connect at once; their searches wait for readiness
                group.start_soon(self.watch_visible)
                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())
                group.cancel_scope.cancel()
        finally:
            self.audit_sink.audit.flush()

    async def serve_http(self, host: str, port: int, sock: socket.socket | None = None) -> None:
        """`sock`: already bound to host and port (toolrag.access.guard.listening_socket), else uvicorn binds."""
        import uvicorn

        if self.startup is None:
            self.check()
        app, _ = http_app(self.mcp_server(caller_of_request), self.settings, host, self.health)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self.scheduler.run)
                group.start_soon(self.start, group)  # /health says `ready: false` until the first imports are done
                group.start_soon(self.watch_visible)
                config = server_config(app, host, port, self.settings.http)
                await uvicorn.Server(config).serve([sock] if sock else None)
                group.cancel_scope.cancel()
        finally:
            self.audit_sink.audit.flush()

    async def sync_once(self) -> dict[str, SyncReport]:
        """Connect to every upstream, import its tools, disconnect."""
        async with anyio.create_task_group() as group:
            await self.start(group)
            group.cancel_scope.cancel()
        return dict(self.reports)


def as_mcp_tool(
    definition: dict[str, Any], score: float, needed_as: str | None = None, also_needs: Sequence[str] = ()
) -> dict[str, Any]:
    """A found tool as an MCP `Tool` (what a client can hand its model unchanged), with the estimated probability
    that it is relevant in its `_meta`, when another found tool needs it, which and for what, and what it requires
    beyond the set."""
    meta: dict[str, Any] = {SCORE_META_KEY: round(score, 3)} | ({NEEDED_META_KEY: needed_as} if needed_as else {})
    if also_needs:
        meta[ALSO_NEEDS_META_KEY] = list(also_needs)
    tool = types.Tool.model_validate({**definition, "_meta": meta})
    return tool.model_dump(by_alias=True, exclude_none=True, mode="json")


def _executed(params: types.CallToolRequestParams) -> tuple[str, dict[str, Any] | None]:
    """The tool a call runs and its arguments: for `call_tool`, the tool it names."""
    arguments = dict(params.arguments or {})
    if params.name == CALL_TOOL.name and isinstance(arguments.get("name"), str):
        inner = arguments.get("arguments")
        return arguments["name"], inner if isinstance(inner, dict) else None
    return params.name, arguments


def _record_outcome(span: Any, name: str, result: types.CallToolResult) -> None:
    """The outcome on the call's span; for `find_tools`, toolrag's own attributes of the search too."""
    if span is None:
        return
    found = result.structured_content
    if name == FIND_TOOLS.name and isinstance(found, dict) and not result.is_error:
        tools = found.get("tools", [])
        span.set_attribute("toolrag.candidates", len(tools))
        span.set_attribute("toolrag.strategy", found.get("strategy", "retrieval"))
        if tools:
            span.set_attribute("toolrag.confidence", tools[0].get("_meta", {}).get(SCORE_META_KEY, 0.0))
    text = " ".join(part.text for part in result.content if isinstance(part, types.TextContent))
    tracing.tool_outcome(span, found if found is not None else text, bool(result.is_error))


def _next_step(results: list[SearchResult]) -> str:
    if not results:
        return NO_TOOL_AVAILABLE
    left = "; ".join(f"{r.name} {also}" for r in results if (also := r.also_needed()))
    if any(r.signals.needed_by for r in results):
        step = "run them with call_tool(name, arguments) in the order given: a tool another needs comes first"
    else:
        step = "run one with call_tool(name, arguments)"
    return f"{step}; {left}" if left else step


def _offered_again(results: list[SearchResult], offered: set[str]) -> list[str]:
    """The results' names when every one of them was offered in this conversation already (at most three)."""
    found = [r.name for r in results if not r.signals.always_included]
    return found[:3] if found and offered.issuperset(found) else []


def _named_step(query: str, named: list[SearchResult], matched: int) -> str:
    if matched <= len(named):
        return "run one with call_tool(name, arguments)"
    return (
        f"{matched} tools match {query.strip()!r}; these are the first {len(named)} by name: run one with"
        " call_tool(name, arguments), or name a longer prefix for the others"
    )


def _status_json(status: UpstreamStatus) -> dict[str, Any]:
    shown = {"server": status.name, "state": status.state, "since": status.since.isoformat(timespec="seconds")}
    return shown | ({"error": status.last_error} if status.last_error else {})


def _waiting_text(waiting: list[UpstreamStatus]) -> str:
    return "; ".join(
        f"server {status.name!r} is {status.state} since {status.since:%H:%M:%S} UTC"
        + (f" ({status.last_error})" if status.state == "down" and status.last_error else "")
        for status in waiting
    )


def _refusal(caller: Caller, kind: Kind) -> str | None:
    """Why the caller may not search (`find_tools`) or call, if it may not."""
    if not caller.granted:
        return (
            "this gateway grants its stdio clients nothing: name one of its [principals] in `local_principal` (its"
            " configuration file)"
        )
    if kind == "call" and not caller.may("agent"):
        return f"principal {caller.name!r} is a {caller.role}: it may find tools, not call them"
    return None


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _refused_call(
    name: str, arguments: dict[str, Any], principal: Principal, session: str | None, offered: bool, why: str
) -> ToolCallEvent:
    """The usage log's record of a call refused before it resolved (its server is switched off): operators see
    agents that keep calling a disabled server."""
    return ToolCallEvent(
        call_id=uuid.uuid4().hex,
        requested_name=name,
        resolved_name=name,
        resolution="exact",
        arguments_bytes=len(json.dumps(arguments).encode()),
        outcome="refused",
        latency_ms=0.0,
        offered=offered,
        error=why,
        session=session,
        user=principal.user,
        tenant=principal.tenant,
        caller=principal.caller,
        origin=CALL_ORIGIN.get(),
    )


def caller_of_request(request: Any) -> Caller:
    """The caller the HTTP guard authenticated for `request` (access/guard.py)."""
    caller = getattr(request, "scope", {}).get(CALLER_KEY)
    if not isinstance(caller, Caller):  # the request guard refuses such requests before they get here
        raise PermissionError("unknown bearer token")
    return caller


def span_tool(registry: ToolRegistry, name: str) -> str:
    """The tool a span is named after: span names must stay few, so a name no tool has reads `call_tool`."""
    if name in (FIND_TOOLS.name, CALL_TOOL.name) or registry.snapshot().position_of(name) is not None:
        return name
    return CALL_TOOL.name


def best_offered(
    registry: ToolRegistry, query: str, principal: Principal, results: list[SearchResult], offered: set[str]
) -> list[str]:
    """When the search found nothing, the usable tool that ranks first for the request if it was offered in
    this conversation already (a rephrased request for it falls below the cut)."""
    if results or not offered:
        return []
    ranked = registry.rank(query, principal, limit=1)
    return [ranked[0].name] if ranked and ranked[0].name in offered else []


def exposed_tools(settings: GatewayConfig, registry: ToolRegistry, principal: Principal) -> list[types.Tool]:
    if not settings.expose:
        return []
    visible = {t.name: t for t in registry.visible_tools(principal)}
    chosen = [visible[name] for name in settings.expose if name in visible]
    return [types.Tool.model_validate(d) for d in render(chosen, "mcp")]
