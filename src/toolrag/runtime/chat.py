"""The `ChatModel` protocol the agent loop talks to, and a scripted model for tests and demos."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from toolrag.errors import ToolragError
from toolrag.model import Tool
from toolrag.runtime.messages import Message


@runtime_checkable
class ChatModel(Protocol):
    """One model call: the conversation so far and the tools offered -> the assistant's message."""

    def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message: ...


@runtime_checkable
class AsyncChatModel(Protocol):
    async def acomplete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message: ...


Step = Message | Callable[[Sequence[Message], Sequence[Tool]], Message]


@dataclass(frozen=True)
class ModelRequest:
    messages: tuple[Message, ...]
    tools: tuple[Tool, ...]


@dataclass
class ScriptedModel:
    """Answers with the given steps in order: fixed messages, or functions of (messages, tools).

    Every request is recorded, so tests can check what the model was shown.
    """

    steps: list[Step]
    requests: list[ModelRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
        with self._lock:
            self.requests.append(ModelRequest(tuple(messages), tuple(tools)))
            if not self.steps:
                raise ToolragError(f"the scripted model has no step left for request {len(self.requests)}")
            step = self.steps.pop(0)
        return step(messages, tools) if callable(step) else step
