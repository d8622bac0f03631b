"""Each system measured by benchmarks/compare/run.py, behind one small interface: build an index of a tool set,
then return the 10 best tool names for a request. Peers are used through their public APIs, with toolrag's
default embedding model wherever they take one (so the comparison is of retrieval methods, not of models)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from toolrag import Principal, ToolRegistry
from toolrag.embed.base import Embedder
from toolrag.model import Tool
from toolrag.search.groups import group_of
from toolrag.search.text import split_identifier

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


class System(Protocol):
    name: str

    def build(self, tools: Sequence[Tool]) -> None: ...

    def search(self, request: str, k: int) -> list[str]: ...


def tool_text(tool: Tool) -> str:
    return f"{split_identifier(tool.name)}: {tool.description}"


class Toolrag:
    name = "toolrag (default)"

    def __init__(self, embedder: Embedder, folder: Path) -> None:
        self.embedder, self.folder = embedder, folder

    def build(self, tools: Sequence[Tool]) -> None:
        self.registry = ToolRegistry(self.folder / "toolrag.db", self.embedder)
        self.registry.register_many(list(tools))

    def search(self, request: str, k: int) -> list[str]:
        return [r.name for r in self.registry.rank(request, Principal.anonymous(), limit=k)]

    def delivered(self, request: str) -> list[str]:
        """What `search()` hands an agent: the ranking after the decision and the cut."""
        return [r.name for r in self.registry.search(request, Principal.anonymous())]


class PlainDense:
    """Cosine of the request with each tool's name + description, the same model as toolrag's."""

    name = "dense (same model)"

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def build(self, tools: Sequence[Tool]) -> None:
        self.names = [t.name for t in tools]
        self.matrix = self.embedder.embed_documents([tool_text(t) for t in tools])

    def search(self, request: str, k: int) -> list[str]:
        scores = self.matrix @ self.embedder.embed_query(request)
        return [self.names[i] for i in np.argsort(-scores)[:k]]


class PlainBM25:
    """bm25s (Lucene, k1=1.5, b=0.75) over name + description, the baseline of ../shared/bench/README.md."""

    name = "BM25 (bm25s)"

    def build(self, tools: Sequence[Tool]) -> None:
        import bm25s

        self.names = [t.name for t in tools]
        self.retriever = bm25s.BM25(k1=1.5, b=0.75)
        self.retriever.index(
            bm25s.tokenize([tool_text(t).lower() for t in tools], show_progress=False), show_progress=False
        )

    def search(self, request: str, k: int) -> list[str]:
        import bm25s

        tokens = bm25s.tokenize([request.lower()], show_progress=False)
        if not tokens.vocab:
            return []
        found, _ = self.retriever.retrieve(tokens, k=min(k, len(self.names)), show_progress=False)
        return [self.names[int(i)] for i in found[0]]


class GraphToolCall:
    """graph-tool-call's ToolGraph: keyword + graph + embedding retrieval (our model through `enable_embedding`)."""

    name = "graph-tool-call 0.47"

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def build(self, tools: Sequence[Tool]) -> None:
        from graph_tool_call import ToolGraph

        self.graph = ToolGraph()
        if any(t.output_schema for t in tools):  # what tools return feeds its dependency detection: MCP's shape
            self.graph.ingest_mcp_tools(
                [
                    {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
                    | ({"outputSchema": t.output_schema} if t.output_schema else {})
                    for t in tools
                ]
            )
        else:
            self.graph.add_tools(
                [
                    {
                        "type": "function",
                        "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                    }
                    for t in tools
                ]
            )
        self.graph.enable_embedding(lambda texts: [list(map(float, v)) for v in self.embedder.embed_documents(texts)])

    def search(self, request: str, k: int) -> list[str]:
        return [tool.name for tool in self.graph.retrieve(request, top_k=k)]


class _SiftEmbedder:
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def embed(self, texts: Sequence[str]) -> list[Any]:
        return list(self.embedder.embed_documents(list(texts)))

    def embed_query(self, texts: Sequence[str]) -> list[Any]:
        return [self.embedder.embed_query(text) for text in texts]


class SiftTools:
    """sift-tools' hybrid search_tools over a category -> service -> function tree (our model as its embedder)."""

    name = "sift-tools 0.8"

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def build(self, tools: Sequence[Tool]) -> None:
        from sift import Sift

        self.sift = Sift(embedder=_SiftEmbedder(self.embedder), retrieval="hybrid")
        self.by_path: dict[str, str] = {}
        for tool in tools:
            service = _UNSAFE.sub("_", group_of(tool) or "general")
            path = f"tools.{service}.{_UNSAFE.sub('_', tool.name)}"
            params = {
                name: {"type": str(spec.get("type", "string")), "desc": str(spec.get("description", ""))}
                for name, spec in tool.input_schema.get("properties", {}).items()
                if isinstance(spec, dict)
            }
            self.sift.tool(path, description=tool.description, params=params, replace=True)(lambda **_: {})
            self.by_path[path] = tool.name
        self.sift.build_index()

    def search(self, request: str, k: int) -> list[str]:
        found = self.sift.search_tools(request, top_k=k)
        return [self.by_path[r.path] for r in found if r.path in self.by_path][:k]


class _LangchainEmbeddings:
    """The langchain_core `Embeddings` interface over our model, as langgraph's store expects."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.embed_documents(texts).tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        return self.embedder.embed_query(text).tolist()  # type: ignore[no-any-return]


class LanggraphBigtool:
    """langgraph-bigtool's retrieval step: its default `retrieve_tools` over a langgraph InMemoryStore whose
    items are the tools' descriptions, as its README builds it."""

    name = "langgraph-bigtool 0.0.3"

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def build(self, tools: Sequence[Tool]) -> None:
        from langchain_core.embeddings import Embeddings
        from langgraph.store.memory import InMemoryStore
        from langgraph_bigtool.tools import get_default_retrieval_tool

        class Adapter(_LangchainEmbeddings, Embeddings):
            pass

        self.store = InMemoryStore(
            index={"embed": Adapter(self.embedder), "dims": self.embedder.dimension, "fields": ["description"]}
        )
        for tool in tools:
            self.store.put(("tools",), tool.name, {"description": tool_text(tool)})
        self.retrieve, _ = get_default_retrieval_tool(("tools",), limit=10)

    def search(self, request: str, k: int) -> list[str]:
        return list(self.retrieve(request, store=self.store))[:k]


class LlamaIndexObjectIndex:
    """LlamaIndex's ObjectIndex of FunctionTools over a VectorStoreIndex, our model as its embed_model."""

    name = "LlamaIndex ObjectIndex 0.14"

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def build(self, tools: Sequence[Tool]) -> None:
        from llama_index.core import VectorStoreIndex
        from llama_index.core.embeddings import BaseEmbedding
        from llama_index.core.objects import ObjectIndex
        from llama_index.core.tools import FunctionTool

        embedder = self.embedder

        class OurModel(BaseEmbedding):
            def _get_query_embedding(self, query: str) -> list[float]:
                return embedder.embed_query(query).tolist()  # type: ignore[no-any-return]

            def _get_text_embedding(self, text: str) -> list[float]:
                return embedder.embed_documents([text])[0].tolist()  # type: ignore[no-any-return]

            def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
                return embedder.embed_documents(texts).tolist()  # type: ignore[no-any-return]

            async def _aget_query_embedding(self, query: str) -> list[float]:
                return self._get_query_embedding(query)

        objects = [
            FunctionTool.from_defaults(fn=lambda **_: None, name=t.name, description=tool_text(t)) for t in tools
        ]
        index = ObjectIndex.from_objects(objects, index_cls=VectorStoreIndex, embed_model=OurModel())
        self.retriever = index.as_retriever(similarity_top_k=10)

    def search(self, request: str, k: int) -> list[str]:
        return [tool.metadata.name for tool in self.retriever.retrieve(request)][:k]
