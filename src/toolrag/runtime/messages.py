"""The conversation as the runtime sees it, independent of any provider's wire format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from toolrag.jsontext import loads

Role = Literal["system", "user", "assistant", "tool"]


CallKind = Literal["function", "tool_search"]


@dataclass(frozen=True)
class ToolCall:
    """A call as the model wrote it: its id, the name it used, and the raw JSON text of the arguments.
    `kind="tool_search"`: a provider's own client-executed tool search item (OpenAI Responses' tool_search_call)."""

    id: str
    name: str
    arguments: str = "{}"
    kind: CallKind = "function"


@dataclass(frozen=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # on tool messages: the call answered
    is_error: bool = False  # on tool messages: the content describes a failure
    loaded: tuple[str, ...] | None = None  # on tool messages answering a tool search: the tools it loads

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def tool_result(cls, call_id: str, content: str, is_error: bool = False) -> Message:
        return cls("tool", content, tool_call_id=call_id, is_error=is_error)

    @classmethod
    def search_result(cls, call_id: str, content: str, loaded: tuple[str, ...]) -> Message:
        """The answer to a tool search under deferred loading: providers load the tools named in `loaded`
        (registry names); `content` is the same in words, for logs and models that read text."""
        return cls("tool", content, tool_call_id=call_id, loaded=loaded)


@dataclass
class Conversation:
    messages: list[Message] = field(default_factory=list)

    def latest_user_text(self, window: int = 1, limit: int | None = None) -> str:
        """The last `window` user messages joined: what pre-selection retrieves for; its last `limit` characters
        when it is longer (the end of a long message is the part nearest to the model's next step)."""
        texts = [m.content for m in self.messages if m.role == "user" and m.content]
        text = "\n".join(texts[-window:])
        return text[-limit:] if limit is not None else text


def recorded_list(answer: Message, record: str, key: str, max_chars: int) -> list[Any] | None:
    """The list under `key` in the arguments of the answer's call of `record`, the one tool a structured-output
    question forces; None when the answer has no such call, its arguments pass `max_chars`, or they are not one
    JSON object holding such a list (a model's answer is untrusted)."""
    for call in answer.tool_calls:
        if call.name != record or len(call.arguments) > max_chars:
            continue
        try:
            arguments = loads(call.arguments or "{}")  # nested 3,000 deep is a JSONDecodeError, not a RecursionError
        except ValueError:
            return None
        found = arguments.get(key) if isinstance(arguments, dict) else None
        return found if isinstance(found, list) else None
    return None
