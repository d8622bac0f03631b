"""Just-in-time injection: the selected tools rendered for each provider, with their prompt-token cost."""

from toolrag.inject.formats import FORMATS, Format, provider_name, render
from toolrag.inject.tokens import count_tokens, tools_tokens

__all__ = ["FORMATS", "Format", "count_tokens", "provider_name", "render", "tools_tokens"]
