"""What the provider adapters share: one call path for the SDKs' sync and async clients."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from toolrag.errors import ToolragError


def create_sync(create: Callable[..., Any], request: dict[str, Any]) -> Any:
    result = create(**request)
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise ToolragError("this adapter holds an async client: use `Agent.arun` (or pass the SDK's sync client)")
    return result


async def create_async(create: Callable[..., Any], request: dict[str, Any]) -> Any:
    """A sync client's call runs in a worker thread so the event loop keeps going; an async client's call
    returns a coroutine there, awaited here."""
    result = await asyncio.to_thread(create, **request)
    return await result if inspect.isawaitable(result) else result
