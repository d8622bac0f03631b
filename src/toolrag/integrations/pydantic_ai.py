"""Pydantic AI: a toolset offering the tools toolrag finds for the run's prompt, among the principal's, with every
call through toolrag's gateway.

    agent = Agent("openai:gpt-4o-mini", toolsets=[ToolragToolset(Toolbox(registry, principal))])
    agent.run_sync("Where is my package A-1042?")

Needs `pip install "toolrag[pydantic-ai]"`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from toolrag.inject.formats import provider_name
from toolrag.inject.told import NO_TOOL_OFFERED
from toolrag.runtime.toolbox import Toolbox
from toolrag.schemas.drafts import to_2020_12

# Arguments pass through as the model wrote them: the gateway validates them against the tool's own schema.
ANY_ARGUMENTS = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))


class ToolragToolset(AbstractToolset[Any]):
    def __init__(self, toolbox: Toolbox, k: int | None = None, id: str | None = None, max_retries: int = 1) -> None:
        self.toolbox, self.k, self._id, self.max_retries = toolbox, k, id, max_retries
        self._selected: tuple[tuple[str | None, str], list[str]] | None = None  # per run and prompt: stable tools

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        visible = self.toolbox.tools
        return {provider_name(name): self._toolset_tool(name) for name in self._select(ctx) if name in visible}

    async def get_instructions(self, ctx: RunContext[Any]) -> str | None:
        """When search finds no tool for the prompt, the model is told so (issue 49): rather than guess, it says
        so to the user."""
        visible = self.toolbox.tools
        return None if any(name in visible for name in self._select(ctx)) else NO_TOOL_OFFERED

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        registry_name = (tool.tool_def.metadata or {}).get("toolrag_name", name)
        result = await self.toolbox.call(registry_name, tool_args, ctx.tool_call_id)
        if result.message.is_error:
            raise ModelRetry(result.message.content)
        return result.message.content

    def _select(self, ctx: RunContext[Any]) -> list[str]:
        request = _prompt_text(ctx.prompt)
        key = (ctx.run_id, request)
        if self._selected is None or self._selected[0] != key:
            names = [result.name for result in self.toolbox.search(request, self.k)] if request else []
            self._selected = (key, names)
        return self._selected[1]

    def _toolset_tool(self, name: str) -> ToolsetTool[Any]:
        tool = self.toolbox.tools[name]
        definition = ToolDefinition(
            name=provider_name(name),
            description=tool.description,
            parameters_json_schema=to_2020_12(tool.input_schema),
            metadata={"toolrag_name": name},
        )
        return ToolsetTool(
            toolset=self, tool_def=definition, max_retries=self.max_retries, args_validator=ANY_ARGUMENTS
        )


def _prompt_text(prompt: str | Sequence[Any] | None) -> str:
    if isinstance(prompt, str):
        return prompt
    return " ".join(part for part in prompt or () if isinstance(part, str))
