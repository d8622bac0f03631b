"""What the provider adapters share: the model call for the SDKs' sync and async clients.

An adapter says how to build its request, which SDK method to call, and how to read the answer; this base turns
that into `complete` (sync client) and `acomplete` (async client, or a sync client run in a worker thread).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from toolrag.errors import ToolragError
from toolrag.model import Tool
from toolrag.runtime.messages import Message


class ProviderModel:
    # Whether the provider can hold tool definitions back until a search loads them (Agent mode="native").
    defers_tools: ClassVar[bool] = False

    def __init__(self, client: Any, model: str, **parameters: Any) -> None:
        self.client = client
        self.model = model
        self.parameters = parameters

    def request(self, messages: Sequence[Message], tools: Sequence[Tool], deferred: bool = False) -> dict[str, Any]:
        """The SDK call's keyword arguments. `deferred`: `tools` are held back until the model's tool search,
        which toolrag answers, loads them (only where `defers_tools`)."""
        raise NotImplementedError

    def endpoint(self) -> Callable[..., Any]:
        raise NotImplementedError

    def parse(self, answer: Any) -> Message:
        raise NotImplementedError

    def complete(self, messages: Sequence[Message], tools: Sequence[Tool], deferred: bool = False) -> Message:
        answer = self.endpoint()(**self.request(messages, tools, deferred))
        if inspect.isawaitable(answer):
            if inspect.iscoroutine(answer):
                answer.close()
            raise ToolragError("this adapter holds an async client: use `Agent.arun` (or pass the SDK's sync client)")
        return self.parse(answer)

    async def acomplete(self, messages: Sequence[Message], tools: Sequence[Tool], deferred: bool = False) -> Message:
        # A sync client's call runs in a worker thread so the event loop keeps going; an async client's call
        # returns a coroutine there, awaited here.
        answer = await asyncio.to_thread(self.endpoint(), **self.request(messages, tools, deferred))
        return self.parse(await answer if inspect.isawaitable(answer) else answer)
