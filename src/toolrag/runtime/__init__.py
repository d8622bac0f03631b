"""The agent runtime: the tool-calling loop, name resolution and the execution gateway."""

from toolrag.events import EventSink, ListSink, OpenTelemetrySink, RoundEvent, SecurityEvent, ToolCallEvent
from toolrag.runtime.agent import FIND_TOOLS, Agent, AgentResult, MaxRoundsExceeded, RoundResult
from toolrag.runtime.chat import AsyncChatModel, ChatModel, ScriptedModel
from toolrag.runtime.gateway import ExecutionPolicy, ToolGateway
from toolrag.runtime.messages import Message, ToolCall
from toolrag.runtime.resolve import NameResolver, UnresolvedName

__all__ = [
    "FIND_TOOLS",
    "Agent",
    "AgentResult",
    "AsyncChatModel",
    "ChatModel",
    "EventSink",
    "ExecutionPolicy",
    "ListSink",
    "MaxRoundsExceeded",
    "Message",
    "NameResolver",
    "OpenTelemetrySink",
    "RoundEvent",
    "RoundResult",
    "ScriptedModel",
    "SecurityEvent",
    "ToolCall",
    "ToolCallEvent",
    "ToolGateway",
    "UnresolvedName",
]
