"""LlamaIndex: an object retriever of tools for LlamaIndex agents, with every call through toolrag's gateway.

    retriever = ToolragObjectRetriever(Toolbox(registry, principal))
    agent = ToolragFunctionAgent(tool_retriever=retriever, llm=OpenAI(model="gpt-4o-mini"))
    await agent.run("Where is my package A-1042?")

`ToolragFunctionAgent` is LlamaIndex's `FunctionAgent` that, offered no tool for a request, is told so (issue 49);
a plain `FunctionAgent` takes the same retriever and says nothing.

Needs `pip install "toolrag[llamaindex]"`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.agent.workflow.agent_context import AgentContext
from llama_index.core.agent.workflow.workflow_events import AgentOutput
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory.types import BaseMemory
from llama_index.core.objects import ObjectRetriever
from llama_index.core.schema import QueryBundle
from llama_index.core.tools.types import AsyncBaseTool, ToolMetadata, ToolOutput

from toolrag.inject.formats import provider_name
from toolrag.inject.told import NO_TOOL_OFFERED
from toolrag.model import Tool
from toolrag.runtime.gateway import CallResult
from toolrag.runtime.toolbox import Toolbox
from toolrag.schemas.drafts import to_2020_12


@dataclass
class SchemaMetadata(ToolMetadata):
    """Tool metadata whose parameters are the tool's own JSON Schema, not one derived from a pydantic model."""

    parameters: dict[str, Any] | None = None

    def get_parameters_dict(self) -> dict[str, Any]:
        return self.parameters or {"type": "object", "properties": {}}


class ToolragTool(AsyncBaseTool):
    """A registry tool as a LlamaIndex tool; `call`/`acall` go through the toolbox's execution gateway."""

    def __init__(self, toolbox: Toolbox, tool: Tool) -> None:
        self.toolbox, self.tool = toolbox, tool
        self._metadata = SchemaMetadata(
            description=tool.description,
            name=provider_name(tool.name),
            parameters=to_2020_12(tool.input_schema),
            return_direct=tool.return_direct,
        )

    @property
    def metadata(self) -> ToolMetadata:
        return self._metadata

    def call(self, input: Any = None, **kwargs: Any) -> ToolOutput:
        arguments = _arguments(input, kwargs)
        return self._output(arguments, self.toolbox.call_sync(self.tool.name, arguments))

    async def acall(self, input: Any = None, **kwargs: Any) -> ToolOutput:
        arguments = _arguments(input, kwargs)
        return self._output(arguments, await self.toolbox.call(self.tool.name, arguments))

    def _output(self, arguments: dict[str, Any], result: CallResult) -> ToolOutput:
        content = result.message.content
        return ToolOutput(
            tool_name=self._metadata.get_name(),
            content=content,
            raw_input=arguments,
            raw_output=result.value if result.outcome == "ok" else content,
            is_error=result.message.is_error,
        )


class ToolragObjectRetriever(ObjectRetriever[AsyncBaseTool]):
    """What `FunctionAgent(tool_retriever=...)` asks for the tools of each request: toolrag's search among the
    principal's tools (none when nothing is relevant)."""

    def __init__(self, toolbox: Toolbox, k: int | None = None) -> None:
        # No node index behind it: the search is toolrag's, so the parent's retriever and node mapping stay unset.
        self.toolbox, self.k = toolbox, k
        self._node_postprocessors: list[Any] = []

    def retrieve(self, str_or_query_bundle: str | QueryBundle) -> list[AsyncBaseTool]:
        query = str_or_query_bundle if isinstance(str_or_query_bundle, str) else str_or_query_bundle.query_str
        return [ToolragTool(self.toolbox, tool) for tool in self.toolbox.select(query, self.k)]

    async def aretrieve(self, str_or_query_bundle: str | QueryBundle) -> list[AsyncBaseTool]:
        return await asyncio.to_thread(self.retrieve, str_or_query_bundle)  # embedding the request blocks


class ToolragFunctionAgent(FunctionAgent):
    """A `FunctionAgent` told, when search offers it no tool for the request, that nothing here does it, so it
    says so to the user rather than guess: the note every way in gives (inject/told.py), added to its system
    prompt for that step."""

    async def take_step(
        self, ctx: AgentContext, llm_input: list[ChatMessage], tools: Sequence[AsyncBaseTool], memory: BaseMemory
    ) -> AgentOutput:
        if not tools:
            llm_input = _with_note(llm_input, NO_TOOL_OFFERED)
        return await super().take_step(ctx, llm_input, tools, memory)


def _with_note(messages: list[ChatMessage], note: str) -> list[ChatMessage]:
    """The note in the first system message (one is added when there is none): some providers take one only."""
    if messages and messages[0].role == MessageRole.SYSTEM:
        first = ChatMessage(role=MessageRole.SYSTEM, content=f"{messages[0].content or ''}\n\n{note}".strip())
        return [first, *messages[1:]]
    return [ChatMessage(role=MessageRole.SYSTEM, content=note), *messages]


def _arguments(input: Any, keywords: dict[str, Any]) -> dict[str, Any]:
    return {**input, **keywords} if isinstance(input, dict) else dict(keywords)
