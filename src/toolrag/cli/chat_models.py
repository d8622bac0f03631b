"""The operator's chat model on the command line: the options that name it, and the provider SDK's client built
from them, with the one record call a command asks for forced where the SDK can force a tool (`toolrag relations
propose`, `toolrag tools write-examples`)."""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

import typer

Provider = Literal["openai", "anthropic", "gemini"]
_KEY_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}

ModelOption = Annotated[str, typer.Option("--model", help="The chat model's name at the provider.")]
ProviderOption = Annotated[
    Provider,
    typer.Option(help="openai: OpenAI or any OpenAI-compatible endpoint (with --base-url; a local server too)."),
]
BaseUrlOption = Annotated[str | None, typer.Option("--base-url", help="The provider's endpoint, if not its own.")]
ApiKeyEnvOption = Annotated[
    str | None,
    typer.Option("--api-key-env", help="Variable holding the API key (default OPENAI_, ANTHROPIC_, GEMINI_API_KEY)."),
]
MaxCallsOption = Annotated[int, typer.Option("--max-calls", min=0, help="Model calls at most.")]
MaxTokensOption = Annotated[int, typer.Option("--max-tokens", min=0, help="Prompt tokens at most.")]


def chat_model(provider: str, model: str, base_url: str | None, api_key_env: str | None, record: str) -> Any:
    """The provider's SDK client for `model`, its answers forced to a call of `record` where the SDK can."""
    key = os.environ.get(api_key_env or _KEY_VARIABLES[provider])
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
