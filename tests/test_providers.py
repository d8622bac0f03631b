"""Provider adapters through the official SDK clients, against a local HTTP server that answers with recorded
payloads of the documented shapes. Requests are checked as the SDKs serialized them."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import MessageParam
from google import genai
from google.genai import interactions as gemini_types
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

from toolrag import Principal, ToolRegistry
from toolrag.runtime import Agent, Message, ToolCall
from toolrag.runtime.providers import AnthropicModel, GeminiInteractionsModel, OpenAIChatModel, OpenAIResponsesModel
from toolrag.runtime.providers.anthropic import to_anthropic_messages
from toolrag.runtime.providers.openai_chat import to_openai_messages
from toolrag.runtime.providers.openai_responses import to_responses_input

from .conftest import CountingEmbedder, Recorder
from .test_runtime import TOOLS

SECRET_USER = Principal(user="secret-user-91", tenant="acme", scopes=frozenset({"billing:write"}))
REFUND = {"payment_id": "pay_7"}


def chat_completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1764000000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": finish, "logprobs": None, "message": message}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


OPENAI_TOOL_CALLS = chat_completion(
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "billing__refund", "arguments": json.dumps(REFUND)},
            },
            {"id": "call_2", "type": "function", "function": {"name": "util__whoami", "arguments": "{}"}},
        ],
    },
    "tool_calls",
)
OPENAI_ANSWER = chat_completion({"role": "assistant", "content": "Refunded pay_7."}, "stop")


def anthropic_message(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-model",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 10},
    }


ANTHROPIC_TOOL_USE = anthropic_message(
    [
        {"type": "text", "text": "I will refund it."},
        {"type": "tool_use", "id": "toolu_1", "name": "billing__refund", "input": REFUND},
        {"type": "tool_use", "id": "toolu_2", "name": "util__whoami", "input": {}},
    ],
    "tool_use",
)
ANTHROPIC_ANSWER = anthropic_message([{"type": "text", "text": "Refunded pay_7."}], "end_turn")


def response(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1764000000,
        "model": "gpt-4o-mini",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "temperature": 1.0,
        "top_p": 1.0,
    }


RESPONSES_CALLS = response(
    [
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "billing__refund",
            "arguments": json.dumps(REFUND),
            "status": "completed",
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "call_2",
            "name": "util__whoami",
            "arguments": "{}",
            "status": "completed",
        },
    ]
)
RESPONSES_ANSWER = response(
    [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Refunded pay_7.", "annotations": []}],
        }
    ]
)


@pytest.fixture
def registry(tmp_path: Path, embedder: CountingEmbedder) -> ToolRegistry:
    reg = ToolRegistry(tmp_path / "providers.db", embedder)
    reg.register(*TOOLS)
    return reg


def check_run(registry: ToolRegistry, model: Any, recorder: Recorder, path: str) -> list[dict[str, Any]]:
    result = Agent(registry, model, SECRET_USER, system="You are a billing assistant.").run("Refund payment pay_7")
    assert result.text == "Refunded pay_7."
    tool_results = [m for m in result.messages if m.role == "tool"]
    assert [m.content for m in tool_results] == ["refunded pay_7", "ok"]
    assert [p for p, _, _ in recorder.requests] == [path, path]
    for _, _, raw in recorder.requests:
        assert "secret-user-91" not in raw and "ToolContext" not in raw
    return [body for _, body, _ in recorder.requests]


def test_openai_chat_completions(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    url, recorder = server
    recorder.answers = [OPENAI_TOOL_CALLS, OPENAI_ANSWER]
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0)
    first, second = check_run(registry, OpenAIChatModel(client, "gpt-4o-mini"), recorder, "/v1/chat/completions")
    assert "billing__refund" in [t["function"]["name"] for t in first["tools"]]
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(second["messages"])
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert second["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "refunded pay_7"}


def test_openai_responses(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    url, recorder = server
    recorder.answers = [RESPONSES_CALLS, RESPONSES_ANSWER]
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0)
    first, second = check_run(registry, OpenAIResponsesModel(client, "gpt-4o-mini"), recorder, "/v1/responses")
    assert first["instructions"] == "You are a billing assistant."
    assert "billing__refund" in [t["name"] for t in first["tools"]]
    TypeAdapter(list[ResponseInputItemParam]).validate_python(second["input"])
    assert second["input"][-2] == {"type": "function_call_output", "call_id": "call_1", "output": "refunded pay_7"}


def test_anthropic_messages(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    url, recorder = server
    recorder.answers = [ANTHROPIC_TOOL_USE, ANTHROPIC_ANSWER]
    client = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0)
    first, second = check_run(registry, AnthropicModel(client, "claude-test-model"), recorder, "/v1/messages")
    assert first["system"] == "You are a billing assistant."
    assert "billing__refund" in [t["name"] for t in first["tools"]]
    TypeAdapter(list[MessageParam]).validate_python(second["messages"])
    assistant, results = second["messages"][1], second["messages"][2]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert [(b["tool_use_id"], b["is_error"]) for b in results["content"]] == [("toolu_1", False), ("toolu_2", False)]


GEMINI_CALLS = {
    "id": "interactions/1",
    "status": "requires_action",
    "steps": [
        {"type": "model_output", "content": [{"type": "text", "text": "Refunding."}]},
        {"type": "function_call", "id": "fc_1", "name": "billing__refund", "arguments": REFUND},
        {"type": "function_call", "id": "fc_2", "name": "util__whoami", "arguments": {}},
    ],
}
GEMINI_ANSWER = {
    "id": "interactions/2",
    "status": "completed",
    "steps": [{"type": "model_output", "content": [{"type": "text", "text": "Refunded pay_7."}]}],
}


def test_gemini_interactions(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    url, recorder = server
    recorder.answers = [GEMINI_CALLS, GEMINI_ANSWER]
    client = genai.Client(api_key="test", http_options={"base_url": url})
    first, second = check_run(registry, GeminiInteractionsModel(client, "gemini-3-flash"), recorder, "/v1/interactions")
    assert first["system_instruction"] == "You are a billing assistant."
    refund = next(t for t in first["tools"] if t["name"] == "billing__refund")
    assert isinstance(TypeAdapter(gemini_types.Tool).validate_python(refund), gemini_types.Function)
    steps = [TypeAdapter(gemini_types.Step).validate_python(step) for step in second["input"]]
    kinds = [type(step).__name__ for step in steps]
    assert kinds == [
        "UserInputStep",
        "ModelOutputStep",
        "FunctionCallStep",
        "FunctionCallStep",
        "FunctionResultStep",
        "FunctionResultStep",
    ]
    assert second["input"][4] == {
        "type": "function_result",
        "call_id": "fc_1",
        "result": "refunded pay_7",
        "is_error": False,
    }


def test_async_openai_client(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    url, recorder = server
    recorder.answers = [OPENAI_TOOL_CALLS, OPENAI_ANSWER]
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0)
    agent = Agent(registry, OpenAIChatModel(client, "gpt-4o-mini"), SECRET_USER)
    assert asyncio.run(agent.arun("Refund payment pay_7")).text == "Refunded pay_7."


def test_conversions_match_the_sdk_types() -> None:
    history = [
        Message.system("Be brief."),
        Message.user("Refund pay_7"),
        Message("assistant", "", (ToolCall("c1", "billing__refund", '{"payment_id": "pay_7"}'),)),
        Message.tool_result("c1", "refunded", is_error=False),
        Message("assistant", "Done."),
    ]
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(to_openai_messages(history))
    instructions, items = to_responses_input(history)
    assert instructions == "Be brief."
    TypeAdapter(list[ResponseInputItemParam]).validate_python(items)
    system, messages = to_anthropic_messages(history)
    assert system == "Be brief." and [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    TypeAdapter(list[MessageParam]).validate_python(messages)


def chat_store(tmp_path: Path) -> str:
    """A registry file holding one refund tool, made by `toolrag import`."""
    from typer.testing import CliRunner

    from toolrag.cli.app import app

    catalog = tmp_path / "c.json"
    catalog.write_text(
        json.dumps(
            [{"name": "billing.refund", "description": "Refund a payment to the card.", "scopes": ["billing:write"]}]
        )
    )
    store = str(tmp_path / "chat.db")
    assert CliRunner().invoke(app, ["import", str(catalog), "--store", store]).exit_code == 0
    return store


def test_chat_command_reads_a_flooding_endpoint_no_further_than_the_cap(tmp_path: Path) -> None:
    """`toolrag chat` talks to any endpoint it is given, often a local server: one answering 256 MB is read no
    further than MAX_CHAT_ANSWER_BYTES (before, the SDK read all of it into memory), the turn fails in one line,
    and the conversation goes on."""
    from typer.testing import CliRunner

    from toolrag.cli.app import app
    from toolrag.limits import MAX_CHAT_ANSWER_BYTES

    from .conftest import flooding

    store = chat_store(tmp_path)
    offered = 64 * MAX_CHAT_ANSWER_BYTES
    with flooding(offered) as (url, written):
        result = CliRunner().invoke(
            app,
            ["chat", "--base-url", f"{url}/v1", "--model", "m", "--store", store, "--scopes", "billing:write"],
            input="Refund payment pay_7\n/quit\n",
        )
        sent = written()
    assert result.exit_code == 0, result.output
    assert f"failed: the chat model's answer is over {MAX_CHAT_ANSWER_BYTES:,} bytes" in result.stdout
    assert sent and max(sent) < offered // 8, sent


def test_chat_command_names_an_endpoint_that_cannot_be_reached(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolrag.cli.app import app

    store = chat_store(tmp_path)
    with socket.socket() as closed:  # a port nothing listens on once this socket is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    result = CliRunner().invoke(
        app, ["chat", "--base-url", url, "--model", "m", "--store", store], input="hello\n/quit\n"
    )
    assert result.exit_code == 0, result.output
    assert f"the model at {url} failed: Connection error." in result.stdout


def test_chat_command_prints_what_the_model_and_its_endpoint_say_as_text(tmp_path: Path) -> None:
    """A second review: the chat printed the endpoint's error body and the model's answer as Rich markup, so
    "[/x]" in either ended the chat in a traceback (the conversation lost) and "[link=...]" reached the terminal."""
    from typer.testing import CliRunner

    from toolrag.cli.app import app

    from .conftest import json_http_server

    markup = "quota [/x] see [link=https://evil.example]docs[/link]"
    answers = [
        (400, {"error": {"message": markup, "type": "invalid_request_error"}}),
        (200, chat_completion({"role": "assistant", "content": f"[/INST] {markup}"}, "stop")),
    ]
    store = chat_store(tmp_path)
    with json_http_server(lambda path, body, raw: answers.pop(0)) as url:
        result = CliRunner().invoke(
            app, ["chat", "--base-url", f"{url}/v1", "--model", "m", "--store", store], input="hi\nhi\n/quit\n"
        )
    assert result.exit_code == 0, result.output
    assert markup in result.stdout and f"assistant> [/INST] {markup}" in result.stdout


def test_chat_command(server: tuple[str, Recorder], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolrag.cli.app import app

    url, recorder = server
    catalog = tmp_path / "c.json"
    catalog.write_text(
        json.dumps(
            [{"name": "billing.refund", "description": "Refund a payment to the card.", "scopes": ["billing:write"]}]
        )
    )
    runner = CliRunner()
    store = str(tmp_path / "chat.db")
    assert runner.invoke(app, ["import", str(catalog), "--store", store]).exit_code == 0
    recorder.answers = [OPENAI_TOOL_CALLS, OPENAI_ANSWER]
    result = runner.invoke(
        app,
        ["chat", "--base-url", f"{url}/v1", "--model", "m", "--store", store, "--scopes", "billing:write"],
        input="Refund payment pay_7\n",
    )
    assert result.exit_code == 0, result.output
    assert "round 1: offered billing.refund" in result.stdout
    assert "called billing__refund -> billing.refund (provider): error" in result.stdout  # no code in this process
    assert "assistant> Refunded pay_7." in result.stdout
