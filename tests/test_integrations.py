"""The framework adapters, each driven through its framework's own loop with the real library installed and a
scripted model: the principal's tools are selected per request, every call passes the execution gateway (hidden
tools refused as missing, arguments validated, the usage log written)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from toolrag import ToolRegistry
from toolrag.runtime import ListSink, SecurityEvent, ToolCallEvent
from toolrag.runtime.toolbox import Toolbox

from .conftest import RETRIEVAL, CountingEmbedder, Recorder
from .test_providers import response
from .test_runtime import BILLING, SEEN, TOOLS, USER

REFUND = {"payment_id": "pay_7"}
REQUEST = "Refund payment pay_7 to the customer's card"


@pytest.fixture
def registry(tmp_path: Path, embedder: CountingEmbedder) -> ToolRegistry:
    reg = ToolRegistry(tmp_path / "integrations.db", embedder, RETRIEVAL)
    reg.register(*TOOLS)
    return reg


def outcomes(events: ListSink) -> list[tuple[str, str]]:
    return [(event.resolved_name, event.outcome) for event in events.of(ToolCallEvent)]


# -- LangChain and LangGraph -----------------------------------------------------------------------------------


def scripted_chat(answers: Sequence[Any]) -> Any:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class ScriptedChat(GenericFakeChatModel):
        """Answers in order and records the tools bound for each call."""

        bound: list[list[str]] = Field(default_factory=list)

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            self.bound.append([tool.name for tool in tools])
            return self

    return ScriptedChat(messages=iter(answers))


def test_langchain_tools_execute_through_the_gateway(registry: ToolRegistry) -> None:
    from langchain_core.messages import ToolMessage

    from toolrag.integrations.langchain import ToolRetriever, langchain_tools

    events = ListSink()
    toolbox = Toolbox(registry, BILLING, events=events)
    (refund, *_) = tools = langchain_tools(toolbox, toolbox.select(REQUEST))
    assert refund.name == "billing__refund" and refund.args_schema["required"] == ["payment_id"]
    assert refund.invoke(REFUND) == "refunded pay_7" and SEEN["refunded"] == "pay_7"
    wrong = refund.invoke({"type": "tool_call", "id": "c2", "name": refund.name, "args": {"payment": 7}})
    assert isinstance(wrong, ToolMessage) and wrong.status == "error" and "invalid arguments" in wrong.content
    assert asyncio.run(refund.ainvoke(REFUND)) == "refunded pay_7"
    assert outcomes(events) == [("billing.refund", o) for o in ("ok", "invalid_arguments", "ok")]
    assert len(tools) <= 3
    documents = ToolRetriever(toolbox=Toolbox(registry, USER)).invoke(REQUEST)
    assert "billing.refund" not in [d.metadata["name"] for d in documents]  # hidden from this principal


def test_the_langchain_retriever_says_why_a_tool_of_a_set_is_there_and_what_is_left(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    from toolrag import Tool
    from toolrag.inject.budget import tool_tokens
    from toolrag.integrations.langchain import ToolRetriever

    tools = [
        Tool(
            name="share_location_via_email",
            description="E-mail my current location to an address.",
            requires=[{"tool": "get_current_location", "parameter": "location"}, "validate_email"],
        ),
        Tool(name="get_current_location", description="The device's current latitude and longitude."),
        Tool(name="validate_email", description="Check that an e-mail address is valid."),
    ]
    registry = ToolRegistry(tmp_path / "sets.db", embedder, RETRIEVAL)
    registry.register_many(tools)
    cost = tool_tokens(registry.snapshot(), registry.get("get_current_location"), "openai")
    registry.retriever.use_config(RETRIEVAL.model_copy(update={"k": 1, "set_budget_tokens": cost}))
    documents = ToolRetriever(toolbox=Toolbox(registry)).invoke("send my current location to dana@example.com")
    metadata = {d.metadata["name"]: d.metadata for d in documents}
    assert metadata["get_current_location"]["needed"] == "needed by share_location_via_email for `location`"
    assert metadata["share_location_via_email"]["also_needs"] == ["validate_email"]


def test_langgraph_agent_selects_per_turn_and_calls_through_the_gateway(registry: ToolRegistry) -> None:
    from langchain_core.messages import AIMessage, ToolMessage

    from toolrag.integrations.langgraph import create_agent

    model = scripted_chat(
        [
            AIMessage("", tool_calls=[{"name": "billing__refund", "args": REFUND, "id": "c1"}]),
            AIMessage("Refunded pay_7."),
        ]
    )
    graph = create_agent(model, Toolbox(registry, BILLING), system="Be brief.")
    state = graph.invoke({"messages": [("user", REQUEST)]})
    assert state["messages"][-1].content == "Refunded pay_7." and SEEN["refunded"] == "pay_7"
    (result,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert result.content == "refunded pay_7" and result.status == "success"
    assert state["selected_tools"][0] == "billing.refund" and model.bound[0][0] == "billing__refund"


def test_langgraph_agent_refuses_a_hidden_tool(registry: ToolRegistry) -> None:
    from langchain_core.messages import AIMessage, ToolMessage

    from toolrag.integrations.langgraph import create_agent

    SEEN.pop("refunded", None)
    events = ListSink()
    model = scripted_chat(
        [
            AIMessage("", tool_calls=[{"name": "billing__refund", "args": REFUND, "id": "c1"}]),
            AIMessage("I cannot do that."),
        ]
    )
    state = create_agent(model, Toolbox(registry, USER, events=events)).invoke({"messages": [("user", REQUEST)]})
    (refused,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert refused.status == "error" and "no tool named 'billing__refund' is available" in refused.content
    assert "billing.refund" not in state["selected_tools"] and "refunded" not in SEEN
    assert any(isinstance(e, SecurityEvent) and e.tool == "billing.refund" for e in events.events)


# -- OpenAI Agents SDK ---------------------------------------------------------------------------------------------


def test_openai_agents_sdk_runs_toolrag_tools(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled

    from toolrag.integrations.openai_agents import tools_for

    set_tracing_disabled(True)  # offline: no trace export
    url, recorder = server
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "billing__refund"}
    text = {"type": "output_text", "text": "Refunded pay_7.", "annotations": []}
    recorder.answers = [
        response([{**call, "arguments": json.dumps(REFUND), "status": "completed"}]),
        response([{"type": "message", "id": "m1", "role": "assistant", "status": "completed", "content": [text]}]),
    ]
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0)
    events = ListSink()
    toolbox = Toolbox(registry, BILLING, events=events)
    agent = Agent(
        name="billing",
        instructions="Be brief.",
        tools=tools_for(toolbox, REQUEST),
        model=OpenAIResponsesModel("gpt-4o-mini", client),
    )
    result = asyncio.run(Runner.run(agent, REQUEST))
    assert result.final_output == "Refunded pay_7." and outcomes(events) == [("billing.refund", "ok")]
    sent = recorder.requests[0][1]["tools"]
    assert sent[0]["name"] == "billing__refund" and sent[0]["parameters"]["required"] == ["payment_id"]
    assert recorder.requests[1][1]["input"][-1]["output"] == "refunded pay_7"
    assert "billing__refund" not in json.dumps([t.name for t in tools_for(Toolbox(registry, USER), REQUEST)])


def test_an_openai_agent_offered_no_tool_is_told_so(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled

    from toolrag.inject.told import NO_TOOL_OFFERED
    from toolrag.integrations.openai_agents import instructions_for, tools_for

    set_tracing_disabled(True)
    url, recorder = server
    text = {"type": "output_text", "text": "Why did the chicken cross the road?", "annotations": []}
    recorder.answers = [
        response([{"type": "message", "id": "m1", "role": "assistant", "status": "completed", "content": [text]}])
    ]
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0)
    tools = tools_for(Toolbox(registry, BILLING), "tell me a joke")
    agent = Agent(
        name="billing",
        instructions=instructions_for("Be brief.", tools),
        tools=tools,
        model=OpenAIResponsesModel("gpt-4o-mini", client),
    )
    asyncio.run(Runner.run(agent, "tell me a joke"))
    assert tools == [] and recorder.requests[0][1]["instructions"] == f"Be brief.\n\n{NO_TOOL_OFFERED}"
    assert instructions_for("Be brief.", tools_for(Toolbox(registry, BILLING), REQUEST)) == "Be brief."


# -- Pydantic AI ---------------------------------------------------------------------------------------------------


def test_pydantic_ai_toolset_selects_for_the_prompt(registry: ToolRegistry) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolrag.integrations.pydantic_ai import ToolragToolset

    offered: list[list[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([tool.name for tool in info.function_tools])
        parts = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        returned = [p for p in parts if p.outcome != "retried"]  # a refused call comes back as a retry
        if returned:
            return ModelResponse(parts=[TextPart(f"Done: {returned[-1].content}")])
        if len(messages) == 1:  # first try: an argument the tool's schema refuses, which the gateway sends back
            return ModelResponse(parts=[ToolCallPart("billing__refund", {"payment": 7}, "c0")])
        return ModelResponse(parts=[ToolCallPart("billing__refund", REFUND, "c1")])

    events = ListSink()
    agent = Agent(FunctionModel(model), toolsets=[ToolragToolset(Toolbox(registry, BILLING, events=events))])
    result = agent.run_sync(REQUEST)
    assert result.output == "Done: refunded pay_7" and offered[0][0] == "billing__refund"
    assert outcomes(events) == [("billing.refund", "invalid_arguments"), ("billing.refund", "ok")]
    listing = FunctionModel(
        lambda m, info: ModelResponse(parts=[TextPart(repr([t.name for t in info.function_tools]))])
    )
    names = Agent(listing).run_sync("Track the parcel of my order", toolsets=[ToolragToolset(Toolbox(registry, USER))])
    assert "shop__track" in names.output and "billing__refund" not in names.output


def test_pydantic_ai_and_langgraph_tell_the_model_when_no_tool_serves(registry: ToolRegistry) -> None:
    """Issue 49, item 5: a prompt search finds nothing for gets no tools and a line saying so, so the model says
    so to the user instead of guessing; a prompt with tools gets none of it."""
    from langchain_core.messages import AIMessage, SystemMessage
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolrag.inject.told import NO_TOOL_OFFERED
    from toolrag.integrations.langgraph import create_agent
    from toolrag.integrations.pydantic_ai import ToolragToolset

    told: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        told.append(str(getattr(messages[-1], "instructions", None)))
        return ModelResponse(parts=[TextPart(f"{len(info.function_tools)} tools")])

    toolset = ToolragToolset(Toolbox(registry, USER))
    assert Agent(FunctionModel(model), toolsets=[toolset]).run_sync("tell me a joke").output == "0 tools"
    assert Agent(FunctionModel(model), toolsets=[toolset]).run_sync("Track the parcel of my order").output != "0 tools"
    assert NO_TOOL_OFFERED in told[0] and NO_TOOL_OFFERED not in told[1]

    prompts: list[list[Any]] = []
    chat = scripted_chat([AIMessage("Ha."), AIMessage("Sent."), AIMessage("Ha.")])
    generate = type(chat)._generate

    def recorded(self: Any, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        prompts.append(list(messages))
        return generate(self, messages, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(type(chat), "_generate", recorded)
        graph = create_agent(chat, Toolbox(registry, USER), system="Be brief.")
        graph.invoke({"messages": [("user", "tell me a joke")]})
        graph.invoke({"messages": [("user", "Track the parcel of my order")]})
        own = create_agent(chat, Toolbox(registry, USER))  # the state's own system message takes the note
        own.invoke({"messages": [SystemMessage("You are Acme's bot."), ("user", "tell me a joke")]})
    first, second, third = prompts
    assert isinstance(first[0], SystemMessage) and first[0].content == f"Be brief.\n\n{NO_TOOL_OFFERED}"
    assert isinstance(second[0], SystemMessage) and second[0].content == "Be brief."
    assert [m.content for m in third if isinstance(m, SystemMessage)] == [f"You are Acme's bot.\n\n{NO_TOOL_OFFERED}"]


# -- LlamaIndex ----------------------------------------------------------------------------------------------------


def test_llamaindex_function_agent_retrieves_toolrag_tools(registry: ToolRegistry) -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
    from llama_index.core.llms import MockFunctionCallingLLM

    from toolrag.integrations.llamaindex import ToolragObjectRetriever

    offered: list[list[str]] = []

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        offered.append([tool.metadata.name for tool in kwargs.get("tools") or []])
        results = [m for m in messages if m.role == MessageRole.TOOL]
        if results:
            return ChatMessage(role=MessageRole.ASSISTANT, content=f"Done: {results[-1].content}")
        call = ToolCallBlock(tool_call_id="c1", tool_name="billing__refund", tool_kwargs=REFUND)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])

    events = ListSink()
    retriever = ToolragObjectRetriever(Toolbox(registry, BILLING, events=events))
    agent = FunctionAgent(tool_retriever=retriever, llm=MockFunctionCallingLLM(response_generator=respond))
    answer = asyncio.run(_run(agent, REQUEST))
    assert "Done: refunded pay_7" in answer and offered[0][0] == "billing__refund"
    assert outcomes(events) == [("billing.refund", "ok")]
    (tool, *_) = retriever.retrieve(REQUEST)
    assert tool.metadata.get_parameters_dict()["required"] == ["payment_id"]
    assert "billing__refund" not in [
        t.metadata.name for t in ToolragObjectRetriever(Toolbox(registry, USER)).retrieve(REQUEST)
    ]


def test_a_llamaindex_agent_offered_no_tool_is_told_so(registry: ToolRegistry) -> None:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.llms import MockFunctionCallingLLM

    from toolrag.inject.told import NO_TOOL_OFFERED
    from toolrag.integrations.llamaindex import ToolragFunctionAgent, ToolragObjectRetriever

    seen: list[tuple[list[str], list[str]]] = []

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        systems = [str(m.content) for m in messages if m.role == MessageRole.SYSTEM]
        seen.append((systems, [tool.metadata.name for tool in kwargs.get("tools") or []]))
        return ChatMessage(role=MessageRole.ASSISTANT, content="I have no tool for that.")

    retriever = ToolragObjectRetriever(Toolbox(registry, BILLING))
    llm = MockFunctionCallingLLM(response_generator=respond)
    agent = ToolragFunctionAgent(tool_retriever=retriever, llm=llm, system_prompt="Be brief.")
    asyncio.run(_run(agent, "tell me a joke"))
    assert seen[-1] == ([f"Be brief.\n\n{NO_TOOL_OFFERED}"], [])
    asyncio.run(_run(agent, REQUEST))
    assert seen[-1][0] == ["Be brief."] and seen[-1][1][0] == "billing__refund"


async def _run(agent: Any, request: str) -> str:
    return str(await agent.run(request))


os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
