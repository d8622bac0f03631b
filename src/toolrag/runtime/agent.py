"""The tool-calling loop, and the two calls below it for users who run their own loop.

    agent = Agent(registry, OpenAIChatModel(OpenAI(), "gpt-4o-mini"), principal)
    result = agent.run("Where is my package A-1042?")

Each round: choose the tools for the model (pre-selection by retrieval; the `find_tools` discovery tool plus
what it found; or, in native mode, every visible tool held back by the provider until toolrag answers the
provider's tool search, so the tool list never changes and the prompt cache survives) -> call the model -> run
its tool calls concurrently through the execution gateway -> append the assistant message and one tool message per
call, in call order -> again, until the model answers without tool calls, a round is return-direct, or the round
limit is reached.

Return-direct: a round ends the loop only when every call in it succeeded on a `return_direct` tool; a round that
mixes such tools with ordinary ones goes back to the model with all results, as any other round.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, cast

from toolrag.catalog.decorator import ToolContext
from toolrag.errors import ToolragError
from toolrag.events import EventSink, FanoutSink, NullSink, RoundEvent
from toolrag.inject.deferred import SEARCH_TOOL
from toolrag.inject.formats import provider_name
from toolrag.inject.told import NO_TOOL_AVAILABLE, NO_TOOL_OFFERED
from toolrag.model import Principal, Tool, normalize_name
from toolrag.registry import ToolRegistry
from toolrag.runtime.chat import AsyncChatModel, ChatModel
from toolrag.runtime.gateway import CallResult, ExecutionPolicy, ToolGateway, permitted_tools, surplus_refusal
from toolrag.runtime.messages import Conversation, Message, ToolCall
from toolrag.runtime.providers.base import ProviderModel
from toolrag.runtime.toolbox import find

Mode = Literal["preselect", "discover", "native"]
FIND_TOOLS = Tool.parse(
    {
        "name": "find_tools",
        "description": "Search the tool catalog for tools that can do a task. Returns tool names with a short "
        "description; the tools found can be called right after.",
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The task, in a few words."},
                "k": {"type": "integer", "minimum": 1, "maximum": 5, "description": "How many tools, default 3."},
            },
            "required": ["query"],
        },
        "source": "toolrag",
    }
)


class MaxRoundsExceeded(ToolragError):
    def __init__(self, rounds: int, messages: list[Message]) -> None:
        super().__init__(f"the model was still calling tools after {rounds} rounds")
        self.messages = messages


@dataclass
class RoundResult:
    """What executing one model response produced."""

    results: list[Message]  # one tool message per call, in call order
    history: list[Message]  # the conversation extended with the assistant message and the results
    return_direct: bool
    called: list[str] = field(default_factory=list)  # the registry name of each call's tool (as asked if unknown)


@dataclass
class AgentResult:
    text: str
    messages: list[Message]
    rounds: int
    stopped_by: Literal["answer", "return_direct", "max_rounds"]
    tools_called: list[str] = field(default_factory=list)


class Agent:
    def __init__(
        self,
        registry: ToolRegistry,
        model: ChatModel | AsyncChatModel,
        principal: Principal | None = None,
        *,
        mode: Mode = "preselect",
        system: str | None = None,
        k: int | None = None,
        context_window: int = 1,
        max_rounds: int = 8,
        on_max_rounds: Literal["raise", "stop"] = "raise",
        policy: ExecutionPolicy | None = None,
        context: ToolContext | None = None,
        events: EventSink | None = None,
    ) -> None:
        self.registry = registry
        self.model = model
        self.principal = principal or Principal.anonymous()
        self.mode = mode
        self.system = system
        self.k = k
        self.context_window = context_window
        self.max_rounds = max_rounds
        self.on_max_rounds = on_max_rounds
        self.policy = policy or ExecutionPolicy()
        self.context = context
        sinks = [sink for sink in (events, registry.usage) if sink is not None]
        self.events: EventSink = FanoutSink(*sinks) if len(sinks) > 1 else (sinks[0] if sinks else NullSink())
        if mode == "native" and not getattr(model, "defers_tools", False):
            raise ToolragError(
                "mode='native' needs a provider that loads tools on demand: AnthropicModel or OpenAIResponsesModel"
            )
        self.discovered: set[str] = set()
        self._request_id = uuid.uuid4().hex
        self._gateway_cache: tuple[tuple[int, str], ToolGateway] | None = None

    # -- the lower level -------------------------------------------------------------------------------------------

    def tools_for_turn(self, messages: Sequence[Message]) -> list[Tool]:
        """The full definitions to offer the model for its next call."""
        if self.mode == "discover":
            return [FIND_TOOLS, *self._visible(sorted(self.discovered))]
        if self.mode == "native":  # all of them, deferred: the provider loads what toolrag's search finds
            return self._visible(sorted(self._gateway().tools))
        limit = self.registry.config.max_request_chars
        request = Conversation(list(messages)).latest_user_text(self.context_window, limit)
        if not request:
            return []
        names = [r.name for r in self.registry.search(request, self.principal, self.k, session=self._request_id)]
        return self._visible(names)

    def execute(self, response: Message, history: Sequence[Message], offered: Sequence[Tool] = ()) -> RoundResult:
        """Run the tool calls of one model response (blocking)."""
        return asyncio.run(self.aexecute(response, history, offered))

    async def aexecute(
        self, response: Message, history: Sequence[Message], offered: Sequence[Tool] = ()
    ) -> RoundResult:
        """Run the tool calls of one model response concurrently, at most `ExecutionPolicy.max_calls_per_response`
        of them (each call past it is answered with an error); results keep the order of the calls."""
        gateway = self._gateway()
        shown = {t.name: t.content_hash for t in offered}  # calls are checked against the versions shown
        limit = self.policy.max_calls_per_response
        results: list[CallResult] = await asyncio.gather(
            *(self._call(gateway, call, shown) for call in response.tool_calls[:limit])
        )
        results += [gateway.refuse(call, surplus_refusal(limit)) for call in response.tool_calls[limit:]]
        messages = [r.message for r in results]
        return_direct = bool(results) and all(r.return_direct for r in results)
        called = [r.tool.name if r.tool else call.name for r, call in zip(results, response.tool_calls, strict=True)]
        return RoundResult(messages, [*history, response, *messages], return_direct, called)

    # -- the loop ------------------------------------------------------------------------------------------------

    def run(self, request: str | Sequence[Message]) -> AgentResult:
        """Run the loop to the end (blocking; use `arun` inside an event loop)."""
        return asyncio.run(self.arun(request))

    async def arun(self, request: str | Sequence[Message]) -> AgentResult:
        self._request_id = uuid.uuid4().hex
        self.discovered = set()  # tools found in an earlier conversation are not offered in this one
        history = self._start(request)
        called: list[str] = []
        for round_number in range(1, self.max_rounds + 1):
            started = time.perf_counter()
            tools = self.tools_for_turn(history)
            offered = self._visible(sorted(self.discovered)) if self.mode == "native" else tools
            asked = time.perf_counter()
            response = await self._complete(history, tools)
            model_ms = (time.perf_counter() - asked) * 1000
            if not response.tool_calls:
                self._emit_round(round_number, offered, response, model_ms, started)
                return AgentResult(response.content, [*history, response], round_number, "answer", called)
            outcome = await self.aexecute(response, history, offered)
            history = outcome.history
            called.extend(outcome.called)
            self._emit_round(round_number, offered, response, model_ms, started)
            if outcome.return_direct:
                text = "\n".join(m.content for m in outcome.results)
                return AgentResult(text, history, round_number, "return_direct", called)
        if self.on_max_rounds == "raise":
            raise MaxRoundsExceeded(self.max_rounds, history)
        text = f"Stopped after {self.max_rounds} rounds without a final answer."
        return AgentResult(text, history, self.max_rounds, "max_rounds", called)

    # -- helpers ---------------------------------------------------------------------------------------------------

    def _start(self, request: str | Sequence[Message]) -> list[Message]:
        messages = [Message.user(request)] if isinstance(request, str) else list(request)
        if self.system and not any(m.role == "system" for m in messages):
            messages.insert(0, Message.system(self.system))
        return messages

    async def _complete(self, history: Sequence[Message], tools: Sequence[Tool]) -> Message:
        if self.mode == "preselect" and not tools:
            history = _with_system_note(history, NO_TOOL_OFFERED)  # not kept: the next round searches again
        if self.mode == "native":
            provider = cast(ProviderModel, self.model)
            return await provider.acomplete(history, tools, deferred=True)
        if isinstance(self.model, AsyncChatModel):
            return await self.model.acomplete(history, tools)
        return await asyncio.to_thread(self.model.complete, history, tools)

    def _gateway(self) -> ToolGateway:
        """One gateway per registry generation and request: its name index is built once, not every round."""
        key = (self.registry.generation, self._request_id)
        if self._gateway_cache is None or self._gateway_cache[0] != key:
            permitted = permitted_tools(self.registry, self.principal, self.policy.fuzzy_cutoff)
            context = self.context or ToolContext(self.principal.user, self.principal.tenant, self._request_id)
            gateway = ToolGateway(
                permitted, (), self.principal, self.registry.function, context, self.policy, self.events
            )
            self._gateway_cache = (key, gateway)
        return self._gateway_cache[1]

    async def _call(self, gateway: ToolGateway, call: ToolCall, offered: Mapping[str, str]) -> CallResult:
        if self.mode == "discover" and normalize_name(call.name) == normalize_name(FIND_TOOLS.name):
            return self._find_tools(call, FIND_TOOLS)
        if self.mode == "native" and (call.kind == "tool_search" or call.name == SEARCH_TOOL.name):
            return self._find_tools(call, SEARCH_TOOL)
        return await gateway.call(call, offered)

    def _find_tools(self, call: ToolCall, tool: Tool) -> CallResult:
        """Answer a search for tools, among the principal's, with cards (discovery) or the tools to load (native)."""
        try:
            found = find(self.registry, self.principal, call.arguments, self._request_id)
        except ToolragError as exc:
            return CallResult(Message.tool_result(call.id, f"Error: {exc}", is_error=True), tool, "invalid_arguments")
        self.discovered.update(r.name for r in found)
        cards = [
            {"name": provider_name(r.name), "description": r.card.text(), "confidence": round(r.score, 2)}
            | ({"needed": needed} if (needed := r.needed_as()) else {})
            | ({"also_needs": [provider_name(n) for n in r.signals.also_needs]} if r.signals.also_needs else {})
            for r in found
        ]
        text = json.dumps(cards, ensure_ascii=False) if cards else NO_TOOL_AVAILABLE
        if tool is SEARCH_TOOL:
            loaded = tuple(r.name for r in found)
            return CallResult(Message.search_result(call.id, text, loaded), tool, "ok")
        return CallResult(Message.tool_result(call.id, text), tool, "ok")

    def _visible(self, names: Sequence[str]) -> list[Tool]:
        visible = self._gateway().tools
        return [visible[name] for name in names if name in visible]

    def _emit_round(
        self, number: int, tools: Sequence[Tool], response: Message, model_ms: float, started: float
    ) -> None:
        total_ms = (time.perf_counter() - started) * 1000
        self.events.emit(
            RoundEvent(
                number, tuple(t.name for t in tools), len(response.tool_calls), round(model_ms, 3), round(total_ms, 3)
            )
        )


def _with_system_note(history: Sequence[Message], note: str) -> list[Message]:
    """`history` with `note` at the end of its first system message, or as one first (providers take system text
    at the start only)."""
    first = next((n for n, m in enumerate(history) if m.role == "system"), None)
    if first is None:
        return [Message.system(note), *history]
    return [*history[:first], Message.system(f"{history[first].content}\n\n{note}"), *history[first + 1 :]]
