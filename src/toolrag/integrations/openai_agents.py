"""OpenAI Agents SDK: the principal's tools for a run, as `FunctionTool`s that execute through toolrag's gateway.

    toolbox = Toolbox(registry, principal)
    request = "Where is my package A-1042?"
    agent = Agent(name="support", instructions="...", tools=tools_for(toolbox, request))
    result = await Runner.run(agent, request)

The SDK's runner does not execute client-side tool search (its `ToolSearchTool(execution="client")` is for manual
Responses orchestration, which `toolrag.runtime.native.DeferredTools` serves), so toolrag selects before the run.

Needs `pip install "toolrag[openai-agents]"`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from toolrag.inject.formats import provider_name
from toolrag.model import Tool
from toolrag.runtime.toolbox import Toolbox
from toolrag.schemas.drafts import to_2020_12


def tools_for(toolbox: Toolbox, request: str, k: int | None = None) -> list[FunctionTool]:
    """The tools toolrag finds for `request` among the principal's (none when nothing is relevant)."""
    return function_tools(toolbox, toolbox.select(request, k))


def function_tools(toolbox: Toolbox, tools: Iterable[Tool]) -> list[FunctionTool]:
    return [function_tool(toolbox, tool) for tool in tools]


def function_tool(toolbox: Toolbox, tool: Tool) -> FunctionTool:
    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        result = await toolbox.call(tool.name, arguments, context.tool_call_id)
        return result.message.content  # an error's text goes back to the model, as the gateway wrote it

    return FunctionTool(
        name=provider_name(tool.name),
        description=tool.description,
        params_json_schema=to_2020_12(tool.input_schema),
        on_invoke_tool=invoke,
        strict_json_schema=False,  # strict mode rewrites schemas; the gateway validates them as written
    )
