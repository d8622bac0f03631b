"""The operator's chat model by its provider's name: the provider SDK's client, with the one record call a question
asks for forced where the SDK can force a tool (relations proposed, examples written). The command line
(`toolrag relations propose`, `toolrag tools write-examples`) and the served API (its `[chat_model]`) build it here.

What a setup lacks is named before any run starts: the provider's SDK (the `providers` extra), or the key of a
provider's own endpoint (a `base_url`, a local server, may need none). Each call is bounded: CALL_TIMEOUT_SECONDS a
try, one retry, at most ANSWER_TOKENS of answer where the SDK takes a limit, and at most MAX_CHAT_ANSWER_BYTES read
of any answer, so a slow endpoint holds a run for minutes, not hours, and a flooding one cannot fill the memory.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any, Literal

from toolrag.errors import ConfigError, MissingExtraError, ToolragError
from toolrag.limits import MAX_CHAT_ANSWER_BYTES, UNCOMPRESSED, read_at_most, uncompressed

Provider = Literal["openai", "anthropic", "gemini"]
KEY_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}
CALL_TIMEOUT_SECONDS = 60.0
CALL_RETRIES = 1
ANSWER_TOKENS = 8192  # 10 languages x 5 examples of a few dozen tokens fit; a longer answer is cut by the provider


class ChatAnswerRefusedError(ToolragError):
    """The model's endpoint sent more than MAX_CHAT_ANSWER_BYTES for one answer, or compressed it (which hides its
    size until it is unpacked)."""


def failure_reason(exc: BaseException) -> str:
    """What a failed call says: this module's own reason where an SDK wrapped it ("Connection error." hides it)."""
    cause: BaseException | None = exc
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ChatAnswerRefusedError):
            return str(cause)
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__


class ChatModelKeyError(ConfigError):
    """The provider's own endpoint needs a key, and the variable that should hold it is not set."""


def chat_model(provider: str, model: str, base_url: str | None, api_key_env: str | None, record: str) -> Any:
    """The provider's SDK client for `model`, its answers forced to a call of `record` where the SDK can; raises
    MissingExtraError without the provider's SDK, ChatModelKeyError without the key its own endpoint needs."""
    variable = api_key_env or KEY_VARIABLES[provider]
    key = os.environ.get(variable)
    if not key and base_url is None:
        raise ChatModelKeyError(
            f"{provider}:{model} needs an API key: set {variable} (or give a base_url that needs none)"
        )
    try:
        if provider == "anthropic":
            return _anthropic(model, base_url, key, record)
        if provider == "gemini":
            return _gemini(model, base_url, key)
        return _openai(model, base_url, key, record)
    except ImportError as exc:
        raise MissingExtraError(f"the {provider} chat model", "providers") from exc


def _anthropic(model: str, base_url: str | None, key: str | None, record: str) -> Any:
    import anthropic
    import httpx2

    from toolrag.runtime.providers import AnthropicModel

    claude = anthropic.Anthropic(
        api_key=key or "none",
        base_url=base_url,
        timeout=CALL_TIMEOUT_SECONDS,
        max_retries=CALL_RETRIES,
        http_client=_capped_client(httpx2),
    )
    return AnthropicModel(claude, model, max_tokens=ANSWER_TOKENS, tool_choice={"type": "tool", "name": record})


def _gemini(model: str, base_url: str | None, key: str | None) -> Any:
    import httpx
    from google import genai
    from google.genai.types import HttpOptions, HttpRetryOptions

    from toolrag.runtime.providers import GeminiInteractionsModel

    options = HttpOptions(
        base_url=base_url,
        timeout=int(CALL_TIMEOUT_SECONDS * 1000),  # milliseconds
        retry_options=HttpRetryOptions(attempts=1 + CALL_RETRIES),
        httpx_client=_capped_client(httpx),
    )
    return GeminiInteractionsModel(genai.Client(api_key=key or "none", http_options=options), model)


def _openai(model: str, base_url: str | None, key: str | None, record: str) -> Any:
    from toolrag.runtime.providers import OpenAIChatModel

    client = capped_openai_client(base_url, key or "none", CALL_TIMEOUT_SECONDS)
    return OpenAIChatModel(client, model, tool_choice={"type": "function", "function": {"name": record}})


def capped_openai_client(base_url: str | None, api_key: str, timeout: float) -> Any:
    """OpenAI's SDK client for `base_url` whose answers are bounded as every chat model's here (`_capped_client`):
    `toolrag chat` talks to whatever endpoint it is given, often a local server, as the configured model does."""
    import httpx2
    import openai

    return openai.OpenAI(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        max_retries=CALL_RETRIES,
        http_client=_capped_client(httpx2, timeout),
    )


def _capped_client(http: ModuleType, timeout: float = CALL_TIMEOUT_SECONDS) -> Any:
    """An HTTP client of `http` (httpx for Gemini's SDK; the httpx2 fork for OpenAI's and Anthropic's) whose answers
    are read no further than MAX_CHAT_ANSWER_BYTES, within `timeout` seconds: a hostile or broken endpoint (a
    `base_url` is often a local server) cannot fill the memory of the process. Answers come uncompressed, so the
    bytes counted are the bytes kept. The proxies of the environment are kept: httpx reads them only for a client
    given no transport, so the client chooses its transports and each is wrapped."""

    class CappedTransport(http.BaseTransport):  # type: ignore[misc, name-defined]
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def handle_request(self, request: Any) -> Any:
            request.headers.update(UNCOMPRESSED)
            response = self.inner.handle_request(request)
            try:
                if not uncompressed(response.headers.get("Content-Encoding")):
                    raise ChatAnswerRefusedError(
                        "the chat model's endpoint compressed its answer though asked not to: refused"
                    )
                body = read_at_most(response.stream, MAX_CHAT_ANSWER_BYTES, timeout)
                if body is None:
                    raise ChatAnswerRefusedError(
                        f"the chat model's answer is over {MAX_CHAT_ANSWER_BYTES:,} bytes, or still coming after"
                        f" {timeout:.0f} s: refused"
                    )
            finally:
                response.stream.close()
            return http.Response(
                response.status_code, headers=response.headers, content=body, extensions=response.extensions
            )

        def close(self) -> None:
            self.inner.close()

    client = http.Client(timeout=timeout, follow_redirects=True)
    client._transport = CappedTransport(client._transport)
    client._mounts = {url: chosen and CappedTransport(chosen) for url, chosen in client._mounts.items()}
    return client
