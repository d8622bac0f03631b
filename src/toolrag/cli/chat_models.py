"""The operator's chat model on the command line: the options that name it (`toolrag relations propose`, `toolrag
tools write-examples`); the client is built by runtime/chat_models.py."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

# runtime/chat_models.py's `Provider`, spelled again: importing the runtime package would cost every command's start.
Provider = Literal["openai", "anthropic", "gemini"]

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
