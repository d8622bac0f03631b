"""Tools from Python callables: `@tool` reads the schema from type hints and the docstring.

A parameter annotated with `ToolContext` receives per-request values (user, tenant, request id) from the runtime
and never appears in the schema, so the model can neither see nor forge them.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_args, get_type_hints

from pydantic import TypeAdapter

from toolrag.errors import InvalidToolError
from toolrag.model import Tool

F = TypeVar("F", bound=Callable[..., Any])
_PARAM_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")
_ARGS_HEADER = re.compile(r"^(?:Args|Arguments|Parameters):\s*$", re.M)


@dataclass(frozen=True)
class ToolContext:
    """Values a tool needs that the model must never see."""

    user: str | None = None
    tenant: str | None = None
    request_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """The description (text before an `Args:` section) and per-parameter descriptions (Google style)."""
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    header = _ARGS_HEADER.search(text)
    if header is None:
        return text, {}
    params: dict[str, str] = {}
    current: str | None = None
    level: int | None = None
    for line in text[header.end() :].splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            break  # the next section (Returns:, Raises:)
        level = indent if level is None else level
        match = _PARAM_LINE.match(line)
        if match and indent == level:
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif current:
            params[current] += " " + line.strip()
    return text[: header.start()].strip(), params


def tool_from_callable(func: Callable[..., Any], **overrides: Any) -> Tool:
    """Build a Tool from a function's name, docstring and type hints."""
    description, param_docs = _docstring_parts(func.__doc__)
    try:
        hints = get_type_hints(func)
    except Exception as exc:
        raise InvalidToolError(f"cannot read type hints of {func.__qualname__}: {exc}") from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, parameter in inspect.signature(func).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = hints.get(name, Any)
        if _is_context(annotation):
            continue
        schema = TypeAdapter(annotation).json_schema()
        schema.pop("title", None)
        if name in param_docs:
            schema["description"] = param_docs[name]
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
        elif _json_safe(parameter.default):
            schema["default"] = parameter.default
        properties[name] = schema
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    data: dict[str, Any] = {
        "name": func.__name__,
        "description": description or f"Calls {func.__name__}.",
        "input_schema": input_schema,
        "source": f"python:{func.__module__}:{func.__qualname__}",
    }
    data.update(overrides)
    return Tool.parse(data)


def context_parameter(func: Callable[..., Any]) -> str | None:
    """The name of the parameter that receives the ToolContext, if the function declares one."""
    hints = get_type_hints(func)
    return next((name for name, annotation in hints.items() if _is_context(annotation)), None)


def _is_context(annotation: Any) -> bool:
    """`ToolContext`, or an optional one (`ToolContext | None`)."""
    return annotation is ToolContext or ToolContext in get_args(annotation)


def _json_safe(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def tool(func: F | None = None, **overrides: Any) -> Any:
    """Mark a function as a tool: `@tool` or `@tool(name="billing.refund", scopes=["billing:write"])`.

    The function stays callable as before; its Tool is at `func.__toolrag_tool__`.
    """

    def mark(f: F) -> F:
        f.__toolrag_tool__ = tool_from_callable(f, **overrides)  # type: ignore[attr-defined]
        return f

    return mark(func) if func is not None else mark
