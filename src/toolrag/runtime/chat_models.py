"""The operator's chat model by its provider's name: the provider SDK's client, with the one record call a question
asks for forced where the SDK can force a tool (relations proposed, examples written). The command line
(`toolrag relations propose`, `toolrag tools write-examples`) and the served API (its `[chat_model]`) build it here."""

from __future__ import annotations

import os
from typing import Any, Literal

Provider = Literal["openai", "anthropic", "gemini"]
KEY_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}


def chat_model(provider: str, model: str, base_url: str | None, api_key_env: str | None, record: str) -> Any:
    """The provider's SDK client for `model`, its answers forced to a call of `record` where the SDK can."""
    key = os.environ.get(api_key_env or KEY_VARIABLES[provider])
    if provider == "anthropic":
        import anthropic

        from toolrag.runtime.providers import AnthropicModel

        claude = anthropic.Anthropic(api_key=key or "none", base_url=base_url)
        return AnthropicModel(claude, model, tool_choice={"type": "tool", "name": record})
    if provider == "gemini":
        from google import genai
        from google.genai.types import HttpOptions

        from toolrag.runtime.providers import GeminiInteractionsModel

        options = HttpOptions(base_url=base_url) if base_url else None
        return GeminiInteractionsModel(genai.Client(api_key=key or "none", http_options=options), model)
    import openai

    from toolrag.runtime.providers import OpenAIChatModel

    client = openai.OpenAI(api_key=key or "none", base_url=base_url)
    return OpenAIChatModel(client, model, tool_choice={"type": "function", "function": {"name": record}})
