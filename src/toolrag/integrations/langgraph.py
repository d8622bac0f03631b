"""LangGraph: an agent graph that selects the principal's tools for each turn, like langgraph-bigtool's retrieval
step but permission-aware, with every call through toolrag's gateway.

    graph = create_agent(ChatOpenAI(model="gpt-4o-mini"), Toolbox(registry, principal))
    graph.invoke({"messages": [("user", "Where is my package A-1042?")]})

select_tools (toolrag search on the latest user message) -> agent (the model with those tools bound) -> tools
(calls through the gateway) -> agent ... until the model answers. The nodes are exported for your own graphs:
`SelectTools` writes `selected_tools` into the state, `CallTools` answers the last AI message's tool calls.

Needs `pip install "toolrag[langgraph]"`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from toolrag.inject.told import NO_TOOL_OFFERED
from toolrag.integrations.langchain import langchain_tools
from toolrag.runtime.toolbox import Toolbox


class ToolSelectionState(MessagesState):
    selected_tools: list[str]  # registry names of the tools offered to the model this turn


class SelectTools:
    """A node: the tools for the latest user message (the last `context_window` of them joined)."""

    def __init__(self, toolbox: Toolbox, k: int | None = None, context_window: int = 1) -> None:
        self.toolbox, self.k, self.context_window = toolbox, k, context_window

    def __call__(self, state: ToolSelectionState) -> dict[str, Any]:
        asked = [_text(m) for m in state["messages"] if isinstance(m, HumanMessage)][-self.context_window :]
        request = "\n".join(text for text in asked if text)
        names = [result.name for result in self.toolbox.search(request, self.k)] if request else []
        return {"selected_tools": names}


class CallTools:
    """A node: every tool call of the last AI message, run through the gateway (at most the policy's
    `max_calls_per_response`; each call past it is answered with an error); results in call order."""

    def __init__(self, toolbox: Toolbox) -> None:
        self.toolbox = toolbox

    def __call__(self, state: ToolSelectionState) -> dict[str, Any]:
        last = cast(AIMessage, state["messages"][-1])
        answers: list[ToolMessage] = []
        limit = self.toolbox.policy.max_calls_per_response
        for number, call in enumerate(last.tool_calls):
            run = self.toolbox.call_sync if number < limit else self.toolbox.refuse_surplus
            result = run(call["name"], call["args"], call["id"])
            status = "error" if result.message.is_error else "success"
            answers.append(ToolMessage(result.message.content, tool_call_id=call["id"] or "", status=status))
        return {"messages": answers}


def create_agent(
    model: BaseChatModel,
    toolbox: Toolbox,
    *,
    k: int | None = None,
    system: str | None = None,
    context_window: int = 1,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The select -> agent -> tools loop as a compiled graph (`invoke`, `ainvoke`, `stream`)."""

    def agent(state: ToolSelectionState) -> dict[str, Any]:
        tools = langchain_tools(toolbox, [toolbox.tools[n] for n in state["selected_tools"] if n in toolbox.tools])
        bound = model.bind_tools(tools) if tools else model
        messages: Sequence[AnyMessage] = state["messages"]
        prompt = [SystemMessage(system), *messages] if system else list(messages)
        return {"messages": [bound.invoke(prompt if tools else _with_note(prompt, NO_TOOL_OFFERED))]}

    def route(state: ToolSelectionState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(ToolSelectionState)
    graph.add_node("select_tools", SelectTools(toolbox, k, context_window))
    graph.add_node("agent", agent)
    graph.add_node("tools", CallTools(toolbox))
    graph.add_edge(START, "select_tools")
    graph.add_edge("select_tools", "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile()


def _text(message: AnyMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


def _with_note(prompt: list[AnyMessage], note: str) -> list[AnyMessage]:
    """`prompt` with `note` at the end of its first system message, or as one first: some providers take system
    text at the start only, and the operator's own comes first."""
    first = next((n for n, m in enumerate(prompt) if isinstance(m, SystemMessage)), None)
    if first is None:
        return [SystemMessage(note), *prompt]
    merged = SystemMessage(f"{prompt[first].text}\n\n{note}")
    return [*prompt[:first], merged, *prompt[first + 1 :]]
