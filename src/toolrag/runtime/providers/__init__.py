"""Adapters from the runtime's messages to the official provider SDKs and back."""

from toolrag.runtime.providers.anthropic import AnthropicModel
from toolrag.runtime.providers.gemini import GeminiInteractionsModel
from toolrag.runtime.providers.openai_chat import OpenAIChatModel
from toolrag.runtime.providers.openai_responses import OpenAIResponsesModel

__all__ = ["AnthropicModel", "GeminiInteractionsModel", "OpenAIChatModel", "OpenAIResponsesModel"]
