"""OpenAI Agents SDK: the principal's tools for a run, as `FunctionTool`s that execute through toolrag's gateway.

    toolbox = Toolbox(registry, principal)
    request = "Where is my package A-1042?"
    tools = tools_for(toolbox, request)
    agent = Agent(name="support", instructions=instructions_for("...", tools), tools=tools)
    result = await Runner.run(agent, request)

The SDK's runner does not execute client-side tool search (its `ToolSearchTool(execution="client")` is for manual
Responses orchestration, which `toolrag.runtime.native.DeferredTools` serves), so toolrag selects before the run.

Needs `pip install "toolrag[openai-agents]"`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from toolrag.inject.formats import provider_name
from toolrag.inject.told import NO_TOOL_OFFERED
from toolrag.model import Tool
from toolrag.runtime.toolbox import Toolbox
from toolrag.schemas.drafts import to_2020_12


def tools_for(toolbox: Toolbox, request: str, k: int | None = None) -> list[FunctionTool]:
    """The tools toolrag finds for `request` among the principal's (none when nothing is relevant)."""
    return function_tools(toolbox, toolbox.select(request, k))


def instructions_for(instructions: str, tools: Sequence[FunctionTool]) -> str:
    """The agent's instructions, and when search found no tool for the request, the note every way in gives
    (issue 49): nothing here does it, so the model says so rather than guess."""
    return instructions if tools else f"{instructions}\n\n{NO_TOOL_OFFERED}"


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
