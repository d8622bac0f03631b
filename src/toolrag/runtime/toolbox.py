"""A principal's tools in one registry: search them, and call them through the execution gateway.

What the framework integrations and the deferred-loading helpers build on: whatever a framework shows its model,
every call goes through the `ToolGateway` (the principal's permissions re-checked, arguments validated, a timeout,
the usage log), and every search covers the principal's visible tools only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import uuid
from collections.abc import Mapping
from typing import Any

from toolrag.catalog.decorator import ToolContext
from toolrag.errors import ToolragError
from toolrag.events import EventSink, FanoutSink, NullSink
from toolrag.jsontext import loads
from toolrag.model import Principal, SearchResult, Tool
from toolrag.registry import ToolRegistry
from toolrag.runtime.gateway import CallResult, ExecutionPolicy, ToolGateway, permitted_tools, surplus_refusal
from toolrag.runtime.messages import ToolCall

MAX_FOUND = 5


def find(
    registry: ToolRegistry, principal: Principal, arguments: Mapping[str, Any] | str, session: str | None = None
) -> list[SearchResult]:
    """Run a model's tool search (`{"query": ..., "k": ...}`) for the principal; k is kept within 1-5."""
    try:
        parsed = loads(arguments or "{}") if isinstance(arguments, str) else dict(arguments)
        query = str(parsed["query"])
        k = None if parsed.get("k") is None else int(parsed["k"])
    except (ValueError, KeyError, TypeError, OverflowError):  # OverflowError: {"k": 1e999}
        raise ToolragError('a tool search takes {"query": "...", "k": 3}') from None
    return registry.search(query, principal, None if k is None else max(1, min(k, MAX_FOUND)), session=session)


class Toolbox:
    def __init__(
        self,
        registry: ToolRegistry,
        principal: Principal | None = None,
        *,
        policy: ExecutionPolicy | None = None,
        context: ToolContext | None = None,
        events: EventSink | None = None,
        session: str | None = None,
    ) -> None:
        self.registry = registry
        self.principal = principal or Principal.anonymous()
        self.policy = policy or ExecutionPolicy()
        self.session = session or uuid.uuid4().hex
        self.context = context or ToolContext(self.principal.user, self.principal.tenant, self.session)
        sinks = [sink for sink in (events, registry.usage) if sink is not None]
        self.events: EventSink = FanoutSink(*sinks) if len(sinks) > 1 else (sinks[0] if sinks else NullSink())
        # What searches returned: the tools a model was shown, with the content hash of the version shown.
        self.offered: dict[str, str] = {}
        self._gateway: tuple[int, ToolGateway] | None = None

    @property
    def gateway(self) -> ToolGateway:
        """The execution gateway over the principal's tools, rebuilt when the registry changes."""
        if self._gateway is None or self._gateway[0] != self.registry.generation:
            permitted = permitted_tools(self.registry, self.principal, self.policy.fuzzy_cutoff)
            gateway = ToolGateway(
                permitted, (), self.principal, self.registry.function, self.context, self.policy, self.events
            )
            self._gateway = (self.registry.generation, gateway)
        return self._gateway[1]

    @property
    def tools(self) -> dict[str, Tool]:
        """The principal's visible tools, by registry name."""
        return self.gateway.tools

    def search(self, query: str, k: int | None = None) -> list[SearchResult]:
        """The principal's tools for a request (none when nothing is relevant), likeliest first."""
        return self._offer(self.registry.search(query, self.principal, k, session=self.session))

    def select(self, query: str, k: int | None = None) -> list[Tool]:
        """The definitions of the tools `search` finds."""
        return [self.tools[result.name] for result in self.search(query, k)]

    def find(self, arguments: Mapping[str, Any] | str) -> list[Tool]:
        """The tools for a model's search call (`{"query": ..., "k": ...}`); raises ToolragError when malformed."""
        found = self._offer(find(self.registry, self.principal, arguments, self.session))
        return [self.tools[result.name] for result in found]

    async def call(self, name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None) -> CallResult:
        """Run a call through the execution gateway (permissions, validation, timeout, usage log)."""
        return await self.gateway.call(_tool_call(name, arguments, call_id), self.offered, self.session)

    def refuse_surplus(self, name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None) -> CallResult:
        """Answer (and log) a call of a model response that made more than `ExecutionPolicy.max_calls_per_response`:
        for loops that run a response's calls one by one (LangGraph's `CallTools`)."""
        refusal = surplus_refusal(self.policy.max_calls_per_response)
        return self.gateway.refuse(_tool_call(name, arguments, call_id), refusal, self.session)

    def call_sync(self, name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None) -> CallResult:
        """`call` for synchronous callers, also from inside a running event loop (run in a worker thread)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.call(name, arguments, call_id))
        with concurrent.futures.ThreadPoolExecutor(1) as worker:
            return worker.submit(asyncio.run, self.call(name, arguments, call_id)).result()

    def _offer(self, results: list[SearchResult]) -> list[SearchResult]:
        visible = self.tools  # the registry filtered for the principal already; this is the snapshot calls use
        found = [result for result in results if result.name in visible]
        self.offered.update({result.name: visible[result.name].content_hash for result in found})
        return found


def _tool_call(name: str, arguments: Mapping[str, Any] | str, call_id: str | None) -> ToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return ToolCall(call_id or uuid.uuid4().hex, name, raw)
