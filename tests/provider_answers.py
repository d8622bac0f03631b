"""What each provider's API answers when a model calls one tool, as its official SDK reads it, and the toolrag
model over that SDK with the call forced: for the tests of the questions toolrag asks the operator's model
(relations proposed, examples written)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
from google import genai

from toolrag.runtime import Message, ToolCall
from toolrag.runtime.providers import AnthropicModel, GeminiInteractionsModel, OpenAIChatModel


class ScriptedRecord:
    """A chat model answering every question with a call of `record` (`arguments`: an object, or raw text to
    test what a broken answer does), counting the calls."""

    def __init__(self, record: str, arguments: dict[str, Any] | str) -> None:
        self.record, self.arguments, self.calls = record, arguments, 0

    def complete(self, messages: Any, tools: Any) -> Message:
        self.calls += 1
        text = self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)
        return Message("assistant", "", (ToolCall(f"c{self.calls}", self.record, text),))


def answer(provider: str, record: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The provider's response body: a call of `record` with `arguments`."""
    if provider == "openai":
        call = {"id": "call_1", "type": "function", "function": {"name": record, "arguments": json.dumps(arguments)}}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1764000000,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "logprobs": None,
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                }
            ],
        }
    if provider == "anthropic":
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": record, "input": arguments}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 50, "output_tokens": 10},
        }
    return {
        "id": "interactions/1",
        "status": "requires_action",
        "steps": [{"type": "function_call", "id": "fc_1", "name": record, "arguments": arguments}],
    }


def provider_model(provider: str, url: str, record: str) -> Any:
    """toolrag's model over the provider's SDK client at `url`, its answers forced to `record` where it can."""
    if provider == "openai":
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0)
        return OpenAIChatModel(client, "gpt-test", tool_choice={"type": "function", "function": {"name": record}})
    if provider == "anthropic":
        claude = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0)
        return AnthropicModel(claude, "claude-test", tool_choice={"type": "tool", "name": record})
    return GeminiInteractionsModel(genai.Client(api_key="test", http_options={"base_url": url}), "gemini-test")
