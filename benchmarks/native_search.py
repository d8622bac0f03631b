"""What deferred loading buys: prompt tokens per model request, and whether the prompt cache's prefix survives.

    python benchmarks/native_search.py [--store REGISTRY.db]

One scripted conversation of three requests (track a parcel, refund a payment, post to Slack) over the example
catalog, for a principal who may use every tool, run by the `Agent` through the official SDK clients (Anthropic
Messages, OpenAI Responses) against recorded answers (httpx2's mock transport: the bodies are exactly what the SDKs
send). Strategies: every tool in every request, pre-selection (toolrag's default), discovery (`find_tools`), and
native deferred loading with toolrag answering the provider's tool search.

Per model request: the prompt tokens the model reads (system or instructions, the messages, and the tool
definitions it is shown: a deferred Anthropic tool costs nothing until a `tool_reference` loads it; a deferred
OpenAI function shows its namespace's name and description; counted with o200k_base, exact with the `tokens`
extra), and whether the prefix a provider caches (system + tool list) is byte-identical to the previous request's.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai

from toolrag import Principal, ToolRegistry
from toolrag.eval.dataset import load_example
from toolrag.inject import count_tokens, provider_name
from toolrag.runtime import Agent, Message
from toolrag.runtime.providers import AnthropicModel, OpenAIResponsesModel

EVERYONE = Principal(user="bench", tenant="acme", scopes=frozenset({"*"}))
CONVERSATION = [
    ("Where is my package A-1042?", "shop.track_shipment", {"order_id": "A-1042"}),
    ("Refund the customer's last payment, pay_7.", "payments.refund_payment", {"payment_id": "pay_7"}),
    ("Post 'deploy done' to the #ops channel on Slack.", "slack.post_message", {"channel": "#ops", "text": "done"}),
]
SYSTEM = "You are the support assistant of an online shop. Be brief."
STRATEGIES = ["all tools", "pre-selection", "discovery", "native + toolrag search"]


@dataclass
class Trace:
    tokens: list[int] = field(default_factory=list)
    same_prefix: list[bool] = field(default_factory=list)
    _previous: str | None = None

    def add(self, tokens: int, prefix: str) -> None:
        self.tokens.append(tokens)
        self.same_prefix.append(prefix == self._previous)
        self._previous = prefix


def script(strategy: str, provider: str) -> list[Callable[[dict[str, Any]], dict[str, Any]]]:
    """The model's answers for each request of the conversation, in order."""
    steps: list[Callable[[dict[str, Any]], dict[str, Any]]] = []
    for request, tool, arguments in CONVERSATION:
        if strategy == "discovery":
            steps.append(_call(provider, "find_tools", {"query": request}))
        elif strategy.startswith("native"):
            steps.append(_search(provider, request))
        steps += [_call(provider, tool, arguments), _text(provider, "Done.")]
    return steps


def _call(provider: str, name: str, arguments: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    if provider == "anthropic":
        block = {"type": "tool_use", "id": f"toolu_{abs(hash(name)) % 10**6}", "name": provider_name(name)}
        return lambda body: _anthropic([{**block, "input": arguments}], "tool_use")
    namespace, _, function = name.partition(".")
    item = {"type": "function_call", "id": "fc_1", "call_id": f"call_{abs(hash(name)) % 10**6}"}

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        deferred = any(tool.get("type") == "tool_search" for tool in body.get("tools", []))
        named = {"namespace": namespace, "name": function} if deferred and function else {"name": provider_name(name)}
        return _response([{**item, **named, "arguments": json.dumps(arguments), "status": "completed"}])

    return answer


def _search(provider: str, query: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    if provider == "anthropic":
        return _call(provider, "search_tools", {"query": query})
    item = {"type": "tool_search_call", "id": "ts_1", "call_id": f"call_s{abs(hash(query)) % 10**6}"}
    item |= {"execution": "client", "arguments": {"query": query}, "status": "completed"}
    return lambda body: _response([item])


def _text(provider: str, text: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    if provider == "anthropic":
        return lambda body: _anthropic([{"type": "text", "text": text}], "end_turn")
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed"}
    return lambda body: _response([{**message, "content": [{"type": "output_text", "text": text, "annotations": []}]}])


def _anthropic(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    usage = {"input_tokens": 0, "output_tokens": 0}
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": usage}  # fmt: skip


def _response(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 0, "model": "m", "status": "completed",
            "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
            "incomplete_details": None, "instructions": None, "metadata": {}}  # fmt: skip


def prompt_tokens(provider: str, body: dict[str, Any]) -> tuple[int, str]:
    """(tokens the model reads, the cached prefix) of one request body."""
    tools = body.get("tools", [])
    if provider == "anthropic":
        referenced = {b["tool_name"] for b in _blocks(body["messages"]) if b.get("type") == "tool_reference"}
        shown = [t for t in tools if not t.get("defer_loading") or t["name"] in referenced]
        shown = [{k: v for k, v in t.items() if k != "defer_loading"} for t in shown]
        text = [body.get("system", ""), json.dumps(body["messages"]), json.dumps(shown)]
        return _count(text), json.dumps([body.get("system"), tools])
    shown = [_as_shown(tool) for tool in tools]
    text = [body.get("instructions", ""), json.dumps(body["input"]), json.dumps(shown)]
    return _count(text), json.dumps([body.get("instructions"), tools])


def _as_shown(tool: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool as the model sees it before a search: namespaces by name and description, deferred
    functions by name and description (their parameters wait for the search)."""
    if tool.get("type") == "namespace":
        return {"name": tool["name"], "description": tool["description"]}
    if tool.get("defer_loading"):
        return {"name": tool["name"], "description": tool.get("description")}
    return tool


def _blocks(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for message in messages:
        for block in message["content"] if isinstance(message["content"], list) else []:
            found.append(block)
            if isinstance(block.get("content"), list):
                found += block["content"]
    return found


def _count(texts: Sequence[str]) -> int:
    return sum(count_tokens(text) for text in texts)


def run(registry: ToolRegistry, strategy: str, provider: str) -> Trace:
    steps, trace = script(strategy, provider), Trace()

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        trace.add(*prompt_tokens(provider, body))
        return httpx2.Response(200, json=steps.pop(0)(body))

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    if provider == "anthropic":
        model: Any = AnthropicModel(anthropic.Anthropic(api_key="x", http_client=http, max_retries=0), "m")
    else:
        model = OpenAIResponsesModel(openai.OpenAI(api_key="x", http_client=http, max_retries=0), "m")
    mode = {"discovery": "discover", "native + toolrag search": "native"}.get(strategy, "preselect")
    agent = Agent(registry, model, EVERYONE, mode=mode, system=SYSTEM)  # type: ignore[arg-type]
    if strategy == "all tools":
        every = sorted(registry.visible_tools(EVERYONE), key=lambda t: t.name)
        agent.tools_for_turn = lambda messages: every  # type: ignore[method-assign]
    history: list[Message] = []
    for request, _, _ in CONVERSATION:
        history = agent.run([*history, Message.user(request)]).messages
    return trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--store", help="a registry holding the example catalog already (a quick start's): nothing to embed again"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        registry = ToolRegistry(args.store or Path(folder) / "example.db")
        registry.register_many(load_example(1).tools)
        print(f"{len(registry.visible_tools(EVERYONE))} tools, {len(CONVERSATION)} requests in one conversation\n")
        print("| provider | strategy | model requests | prompt tokens per request (mean) | prompt tokens in all "
              "| requests whose cached prefix (system + tools) equals the previous one's |")  # fmt: skip
        print("|---|---|---|---|---|---|")
        for provider in ("anthropic", "openai-responses"):
            for strategy in STRATEGIES:
                trace = run(registry, strategy, provider)
                same = sum(trace.same_prefix[1:])
                print(
                    f"| {provider} | {strategy} | {len(trace.tokens)} | {sum(trace.tokens) / len(trace.tokens):,.0f} "
                    f"| {sum(trace.tokens):,} | {same} of {len(trace.tokens) - 1} |"
                )


if __name__ == "__main__":
    main()
