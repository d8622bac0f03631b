"""The operator's chat model by its provider's name: the provider SDK's client, with the one record call a question
asks for forced where the SDK can force a tool (relations proposed, examples written). The command line
(`toolrag relations propose`, `toolrag tools write-examples`) and the served API (its `[chat_model]`) build it here.

What a setup lacks is named before any run starts: the provider's SDK (the `providers` extra), or the key of a
provider's own endpoint (a `base_url`, a local server, may need none). Each call is bounded: CALL_TIMEOUT_SECONDS a
try, one retry, and at most ANSWER_TOKENS of answer where the SDK takes a limit, so a slow endpoint holds a run for
minutes, not hours.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from toolrag.errors import ConfigError, MissingExtraError

Provider = Literal["openai", "anthropic", "gemini"]
KEY_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}
CALL_TIMEOUT_SECONDS = 60.0
CALL_RETRIES = 1
ANSWER_TOKENS = 8192  # 10 languages x 5 examples of a few dozen tokens fit; a longer answer is cut by the provider


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

    from toolrag.runtime.providers import AnthropicModel

    claude = anthropic.Anthropic(
        api_key=key or "none", base_url=base_url, timeout=CALL_TIMEOUT_SECONDS, max_retries=CALL_RETRIES
    )
    return AnthropicModel(claude, model, max_tokens=ANSWER_TOKENS, tool_choice={"type": "tool", "name": record})


def _gemini(model: str, base_url: str | None, key: str | None) -> Any:
    from google import genai
    from google.genai.types import HttpOptions, HttpRetryOptions

    from toolrag.runtime.providers import GeminiInteractionsModel

    options = HttpOptions(
        base_url=base_url,
        timeout=int(CALL_TIMEOUT_SECONDS * 1000),  # milliseconds
        retry_options=HttpRetryOptions(attempts=1 + CALL_RETRIES),
    )
    return GeminiInteractionsModel(genai.Client(api_key=key or "none", http_options=options), model)


def _openai(model: str, base_url: str | None, key: str | None, record: str) -> Any:
    import openai

    from toolrag.runtime.providers import OpenAIChatModel

    client = openai.OpenAI(
        api_key=key or "none", base_url=base_url, timeout=CALL_TIMEOUT_SECONDS, max_retries=CALL_RETRIES
    )
    return OpenAIChatModel(client, model, tool_choice={"type": "function", "function": {"name": record}})
