"""LangChain: a principal's tools as LangChain tools that execute through toolrag's gateway, and a retriever of tools.

    toolbox = Toolbox(registry, principal)
    tools = langchain_tools(toolbox, toolbox.select("Where is my package?"))
    model.bind_tools(tools)                       # any LangChain chat model
    ToolRetriever(toolbox=toolbox).invoke("refund a payment")   # Documents: one card per tool, likeliest first

Needs `pip install "toolrag[langchain]"`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import StructuredTool, ToolException
from pydantic import ConfigDict

from toolrag.inject.formats import provider_name
from toolrag.model import Tool
from toolrag.runtime.gateway import CallResult
from toolrag.runtime.toolbox import Toolbox
from toolrag.schemas.drafts import to_2020_12


def langchain_tools(toolbox: Toolbox, tools: Iterable[Tool]) -> list[StructuredTool]:
    """LangChain tools for `tools`; each call goes through the toolbox's execution gateway."""
    return [langchain_tool(toolbox, tool) for tool in tools]


def langchain_tool(toolbox: Toolbox, tool: Tool) -> StructuredTool:
    def run(**arguments: Any) -> str:
        return _content(toolbox.call_sync(tool.name, arguments))

    async def arun(**arguments: Any) -> str:
        return _content(await toolbox.call(tool.name, arguments))

    return StructuredTool(
        name=provider_name(tool.name),
        description=tool.description,
        args_schema=to_2020_12(tool.input_schema),  # a JSON Schema: the gateway validates, under the tool's draft
        func=run,
        coroutine=arun,
        return_direct=tool.return_direct,
        handle_tool_error=True,  # a refused or failed call goes back to the model as an error message
        metadata={"toolrag_name": tool.name},
    )


def _content(result: CallResult) -> str:
    if result.message.is_error:
        raise ToolException(result.message.content)
    return result.message.content


class ToolRetriever(BaseRetriever):
    """The tools for a query as Documents: the capability card as text; name, score, schema, and for a tool of a set
    why it is there (`needed`: "needed by X for `location`") and what it requires beyond the set (`also_needs`, to
    ask for by name) as metadata."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    toolbox: Toolbox
    k: int | None = None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        documents = []
        for result in self.toolbox.search(query, self.k):
            tool = self.toolbox.tools[result.name]
            metadata = {
                "name": tool.name,
                "score": result.score,
                "input_schema": tool.input_schema,
                "needed": result.needed_as(),
                "also_needs": list(result.signals.also_needs),
            }
            documents.append(Document(page_content=result.card.text(), metadata=metadata))
        return documents
