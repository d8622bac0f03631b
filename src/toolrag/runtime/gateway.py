"""The execution gateway: every tool call passes here, whatever the model was shown.

For each call: resolve the name among the tools the principal may use; refuse (and log a security event for) a
name that only a hidden tool answers to, without telling the model it exists; parse and validate the arguments
against the tool's JSON Schema; look again whether the principal may still use that version of the tool (the check
can take seconds, and an operator may switch the tool off meanwhile); run the tool with a timeout and the tool
context (a sync tool on threads of its own, runtime/threads.py); turn the result or the error into the tool message
the model sees.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import BaseModel

from toolrag.catalog.decorator import ToolContext, context_parameter
from toolrag.events import CALL_ORIGIN, EventSink, NullSink, Outcome, SecurityEvent, ToolCallEvent
from toolrag.inject.formats import provider_name
from toolrag.jsontext import loads
from toolrag.model import Principal, Tool
from toolrag.runtime.messages import Message, ToolCall
from toolrag.runtime.resolve import (
    MAX_REQUESTED_CHARS,
    NameResolver,
    Resolution,
    UnresolvedName,
    segment_key,
    shown_name,
)
from toolrag.runtime.threads import Busy, SyncTools
from toolrag.schemas.arguments import INLINE_CHARS, ArgumentChecker, ArgumentsRefused, Measure, measure
from toolrag.schemas.worker import CheckingProcess, CheckRefused

# The tools a model was shown: names, or names with the content hash of the version shown.
Offered: TypeAlias = Set[str] | Mapping[str, str]
MAX_NAMED = 20  # undeclared arguments named in one error
MAX_SCHEMA_EXCERPT = 4000  # characters of the current schema in the answer to a call against an older version

if TYPE_CHECKING:
    from toolrag.registry import ToolRegistry

Function = Callable[..., Any]


@dataclass(frozen=True)
class ExecutionPolicy:
    """How failures are handled.

    An ordinary exception of a tool goes back to the model as an error message so it can retry, unless its type
    is in `propagate` (e.g. your authorization errors) or `always_raise` is set (fail fast). Exceptions that are not
    `Exception`s (KeyboardInterrupt, SystemExit, MemoryError's siblings) always propagate.
    """

    timeout_seconds: float = 30.0
    propagate: tuple[type[BaseException], ...] = ()
    always_raise: bool = False
    fuzzy_cutoff: float = 85.0
    check_seconds: float = 2.0  # the budget of a check in the checking process (schemas/arguments.py); past it: refused
    # Calls of sync tools one caller may have running at once (a timed-out one runs on until it returns); past it a
    # call is refused at once (runtime/threads.py). As many as one response may make.
    max_calls_in_flight: int = 16
    # Calls of one model response that are run; the rest are answered with an error (the Agent's loop). A prompt-
    # injected model writes as many calls as its output allows, and `max_rounds` bounds rounds, not calls.
    max_calls_per_response: int = 16


@dataclass(frozen=True)
class CallResult:
    message: Message
    tool: Tool | None
    outcome: Outcome
    value: Any = None  # what the tool returned, before it was serialized into the message

    @property
    def return_direct(self) -> bool:
        return self.outcome == "ok" and self.tool is not None and self.tool.return_direct


class ToolTimeout(Exception):
    pass


class Permitted:
    """The tools one principal may use at one registry generation, indexed for calls: by name, by the names a
    model may write (resolver), the hidden ones by lookup key (to log a refusal), and each tool's argument checker.
    Built once per generation and visibility (`permitted_tools`), shared by every gateway, so a call costs the
    same at 10 tools and at 100,000."""

    def __init__(
        self,
        visible: Iterable[Tool],
        hidden: Iterable[Tool],
        fuzzy_cutoff: float = 85.0,
        latest: Callable[[], Permitted] | None = None,
    ) -> None:
        """`latest`: the principal's permitted tools now (`permitted_tools` passes it); None for a fixed set."""
        self.tools = {t.name: t for t in visible}
        self._latest = latest
        self.resolver = NameResolver(self.tools, fuzzy_cutoff)
        hidden_names = [t.name for t in hidden if t.name not in self.tools]
        self.hidden = {key: name for name in hidden_names for key in _lookup_keys(name)}
        self._checkers: dict[str, ArgumentChecker] = {}  # per tool: building a schema's validator is slow

    def latest(self) -> Permitted:
        """The tools the principal may use now: this set, or the one of the registry's current generation."""
        return self._latest() if self._latest is not None else self

    def checker(self, tool: Tool) -> ArgumentChecker:
        found = self._checkers.get(tool.name)
        if found is None:
            found = self._checkers[tool.name] = ArgumentChecker(tool.input_schema)
        return found


# Large arguments are checked in a process of their own (schemas/worker.py), one for the whole server, in turns
# taken fairly among principals.
_CHECKING = CheckingProcess()
SYNC_TOOLS = SyncTools()  # the threads sync tools run on, shared by every gateway of the process


_PERMITTED: weakref.WeakKeyDictionary[ToolRegistry, OrderedDict[tuple[object, ...], Permitted]] = (
    weakref.WeakKeyDictionary()
)
_PERMITTED_LOCK = threading.Lock()
_PERMITTED_PER_REGISTRY = 256


def permitted_tools(registry: ToolRegistry, principal: Principal, fuzzy_cutoff: float = 85.0) -> Permitted:
    """The principal's `Permitted` tools in the registry's current generation (cached per visibility)."""
    key = (registry.generation, principal.visibility_key, fuzzy_cutoff)
    with _PERMITTED_LOCK:
        cache = _PERMITTED.setdefault(registry, OrderedDict())
        found = cache.get(key)
    if found is None:
        source = weakref.ref(registry)  # the cache must not keep its own key alive

        def latest() -> Permitted:
            current = source()
            return permitted_tools(current, principal, fuzzy_cutoff) if current is not None else found_now

        found = found_now = Permitted(*registry.partition(principal), fuzzy_cutoff, latest)
        with _PERMITTED_LOCK:
            cache[key] = found
            while len(cache) > _PERMITTED_PER_REGISTRY:
                cache.popitem(last=False)
    return found


class ToolGateway:
    """Authorizes, validates and executes calls for one principal over a set of tools."""

    def __init__(
        self,
        visible: Iterable[Tool] | Permitted,
        hidden: Iterable[Tool],
        principal: Principal,
        functions: Callable[[str], Function | None],
        context: ToolContext | None = None,
        policy: ExecutionPolicy | None = None,
        events: EventSink | None = None,
    ) -> None:
        """`visible` and `hidden`: the tools the principal may and may not use; or `permitted_tools(...)` for
        them, already indexed (then `hidden` is ignored)."""
        self.principal = principal
        self.functions = functions
        self.context = context or ToolContext(user=principal.user, tenant=principal.tenant)
        self.policy = policy or ExecutionPolicy()
        self.events = events or NullSink()
        permitted = visible if isinstance(visible, Permitted) else Permitted(visible, hidden, self.policy.fuzzy_cutoff)
        self.permitted = permitted
        self.tools = permitted.tools
        self.resolver = permitted.resolver
        self._hidden = permitted.hidden

    async def call(self, call: ToolCall, offered: Offered, session: str | None = None) -> CallResult:
        """Run one call. `offered`: the tools the model was shown, with the content hash of the version shown when
        known (a call written against an older version whose arguments do not fit the current one is refused with
        the current schema, never run with a renamed parameter dropped). `session` names the conversation in
        events (default: the context's request id)."""
        started = time.perf_counter()
        session = session or self.context.request_id
        resolution: Resolution | None = None
        tool: Tool | None = None
        result: Any = None
        try:
            resolution = self._resolve(call.name)
            tool = self.tools[resolution.name]
            arguments = await self._arguments(tool, call.arguments or "{}", _changed_since_offered(tool, offered))
            await asyncio.to_thread(self._still_permitted, call.name, tool)  # reads the store's generation
            result = await self._run(tool, arguments)
            outcome: Outcome = "ok"
            message = Message.tool_result(call.id, serialize(result))
        except _Refusal as refusal:
            message = Message.tool_result(call.id, f"Error: {refusal}", is_error=True)
            self._record(call, resolution, refusal.logged, started, offered, message.content, session)
            return CallResult(message, tool, refusal.outcome, result)
        except Exception as exc:
            if self.policy.always_raise or isinstance(exc, self.policy.propagate):
                self._record(call, resolution, "propagated", started, offered, repr(exc), session)
                raise
            outcome = "timeout" if isinstance(exc, ToolTimeout) else "error"
            text = (
                str(exc)
                if isinstance(exc, ToolTimeout)
                else f"tool {tool.name if tool else shown_name(call.name)} failed: "
            )
            if outcome == "error":
                text += f"{type(exc).__name__}: {exc}"
            message = Message.tool_result(call.id, f"Error: {text}", is_error=True)
        except BaseException:
            self._record(call, resolution, "propagated", started, offered, "non-Exception error", session)
            raise
        error = message.content if message.is_error else None
        self._record(call, resolution, outcome, started, offered, error, session)
        return CallResult(message, tool, outcome, result)

    def refuse(self, call: ToolCall, reason: str, session: str | None = None) -> CallResult:
        """Answer (and log) a call the loop around the gateway does not run, saying why: one past
        `ExecutionPolicy.max_calls_per_response` (`surplus_refusal`)."""
        message = Message.tool_result(call.id, f"Error: {reason}", is_error=True)
        self._record(call, None, "refused", time.perf_counter(), set(), message.content, session)
        return CallResult(message, None, "refused")

    def _resolve(self, requested: str) -> Resolution:
        # A call spelled as a name the principal's rules deny is refused whatever visible tool it would resolve to
        # (`git.git_reset` denied, and `git.git_reset_hard` visible: a near miss would reach it).
        readable = len(requested) <= MAX_REQUESTED_CHARS
        denied = self.principal.denying(requested) if readable else None
        try:
            if denied is not None:
                raise self.resolver.unknown(requested)
            return self.resolver.resolve(requested)
        except UnresolvedName as exc:
            # A hidden tool gets exactly the answer a name no tool has gets (same outcome, same wording, the same
            # suggestions from visible tools), so its existence cannot be probed; only the operator's log knows. A name
            # longer than any tool's names none: it is not read further.
            keys = _lookup_keys(requested) if readable else []
            hidden = next((self._hidden[key] for key in keys if key in self._hidden), None) or (denied and requested)
            if hidden:
                self.events.emit(
                    SecurityEvent(
                        self.principal.user,
                        self.principal.tenant,
                        requested,
                        hidden,
                        "the principal may not use this tool",
                    )
                )
            raise _Refusal("unknown_tool", str(exc), logged="refused" if hidden else None) from None

    def _still_permitted(self, requested: str, tool: Tool) -> None:
        """Refuse the call when, since it was resolved, the principal lost the tool (answered as a new call by that
        name would be) or the tool's input schema changed (its arguments were checked against the one before)."""
        latest = self.permitted.latest()
        if latest is self.permitted:
            return
        now = latest.tools.get(tool.name)
        if now is None:
            try:
                latest.resolver.resolve(requested)
            except UnresolvedName as exc:
                raise _Refusal("unknown_tool", str(exc)) from None
            raise _Refusal("unknown_tool", f"no tool named {tool.name!r} is available; call again")
        if now.input_schema != tool.input_schema:
            raise _Refusal(
                "invalid_arguments",
                f"{tool.name} changed while the call was checked; its input schema now: {_schema_excerpt(now)}."
                " Call it again.",
            )

    async def _arguments(self, tool: Tool, raw: str, changed: bool = False) -> dict[str, Any]:
        """The call's arguments, parsed and checked against the tool's schema off the event loop: in a thread when
        the check's worst case is small (ArgumentChecker.inline_errors), else in the checking process within the
        policy's budget. `changed`: the tool changed since the model was shown it, so an argument the current
        schema does not declare is an error too (a renamed parameter), and errors carry the current schema."""
        checker = self.permitted.checker(tool)
        small = len(raw) <= INLINE_CHARS
        arguments, size = self._measured(tool, raw) if small else await asyncio.to_thread(self._measured, tool, raw)
        errors = await asyncio.to_thread(checker.inline_errors, arguments, size) if small and size.small else None
        if errors is None:
            try:
                errors = await _CHECKING.check(
                    self.principal.caller, checker.schema_text, raw, self.policy.check_seconds
                )
            except CheckRefused as exc:
                raise _Refusal("invalid_arguments", f"arguments for {tool.name} were not checked: {exc}") from None
        if changed:
            errors = [*errors, *undeclared_arguments(tool.input_schema, arguments)]
        if errors:
            now = (
                f" {tool.name} changed since it was offered; its input schema now: {_schema_excerpt(tool)}."
                if changed
                else ""
            )
            raise _Refusal(
                "invalid_arguments", f"invalid arguments for {tool.name}: {'; '.join(errors)}.{now} Fix them and retry."
            )
        return arguments

    @staticmethod
    def _measured(tool: Tool, raw: str) -> tuple[dict[str, Any], Measure]:
        try:
            arguments = loads(raw)
        except json.JSONDecodeError as exc:
            raise _Refusal("invalid_arguments", f"arguments for {tool.name} are not valid JSON: {exc.msg}") from None
        if not isinstance(arguments, dict):
            raise _Refusal("invalid_arguments", f"arguments for {tool.name} must be a JSON object")
        try:
            return arguments, measure(arguments)
        except ArgumentsRefused as exc:
            raise _Refusal("invalid_arguments", f"arguments for {tool.name} refused: {exc}") from None

    async def _run(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        function = self.functions(tool.name)
        if function is None:
            raise _Refusal("error", f"tool {tool.name} has no implementation in this process")
        parameter = context_parameter(function)
        if parameter is not None:
            arguments = {**arguments, parameter: self.context}
        timeout = self.policy.timeout_seconds
        try:
            if inspect.iscoroutinefunction(function):
                return await asyncio.wait_for(function(**arguments), timeout)
            bound = functools.partial(function, **arguments)
            principal = self.principal
            return await SYNC_TOOLS.run(
                bound, principal.caller, principal.tenant, timeout, self.policy.max_calls_in_flight
            )
        except Busy as exc:
            raise _Refusal("error", f"{tool.name} was not run: {exc}") from None
        except TimeoutError:
            raise ToolTimeout(f"tool {tool.name} timed out after {self.policy.timeout_seconds:g} s") from None

    def _record(
        self,
        call: ToolCall,
        resolution: Resolution | None,
        outcome: Outcome,
        started: float,
        offered: Offered,
        error: str | None,
        session: str | None,
    ) -> None:
        name = resolution.name if resolution else None
        self.events.emit(
            ToolCallEvent(
                call_id=call.id,
                requested_name=shown_name(call.name),
                resolved_name=name,
                resolution=resolution.method if resolution else None,
                arguments_bytes=len(call.arguments.encode("utf-8", "surrogatepass")),  # refused, still counted
                outcome=outcome,
                latency_ms=round((time.perf_counter() - started) * 1000, 3),
                offered=name in offered if name else False,
                error=error,
                session=session,
                user=self.principal.user,
                tenant=self.principal.tenant,
                caller=self.principal.caller,
                origin=CALL_ORIGIN.get(),
            )
        )


def surplus_refusal(limit: int) -> str:
    return f"not run: one response may make at most {limit} calls; make the rest in your next one"


class _Refusal(Exception):
    """A call not run: `outcome` is what the caller is told, `logged` (when given) what the operator's log says."""

    def __init__(self, outcome: Outcome, message: str, logged: Outcome | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.logged = logged or outcome


def _changed_since_offered(tool: Tool, offered: Offered) -> bool:
    shown = offered.get(tool.name) if isinstance(offered, Mapping) else None
    return shown is not None and shown != tool.content_hash


def undeclared_arguments(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """Arguments a schema neither declares nor lets through (`additionalProperties` / `patternProperties`)."""
    if schema.get("additionalProperties") not in (None, False) or schema.get("patternProperties"):
        return []
    declared = schema.get("properties") or {}
    return [f"{name!r} is not a parameter" for name in list(arguments)[:MAX_NAMED] if name not in declared]


def _schema_excerpt(tool: Tool) -> str:
    text = json.dumps(tool.input_schema, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= MAX_SCHEMA_EXCERPT else text[: MAX_SCHEMA_EXCERPT - 3] + "..."


def _lookup_keys(name: str) -> list[object]:
    """The forms under which a call may name a tool: as written, as rendered for a provider, normalized."""
    return [name, provider_name(name), segment_key(name)]


def serialize(result: Any) -> str:
    """What the model reads: text as it is, None as nothing, anything structured as JSON."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    return json.dumps(result, ensure_ascii=False, default=str)
