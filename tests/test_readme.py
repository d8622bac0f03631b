"""The README as a new user reads it: every snippet runs as printed, in order, in an empty folder, after the
commands it says to run first; every relative link of the README and the docs leads somewhere.

Blocks run: ```python (each in a fresh interpreter), ```bash (each line in a shell), and ```toml blocks whose first
line is `# FILE` are written to FILE. A block right after `<!-- not run by the README test: why -->` is skipped
(only what CI itself runs: the Quick start's install and the development commands); a server a block starts listens
on a free port instead of the README's, and the block waits for it and stops it itself. The HTTP API's request body
is also checked against the API's model. The OpenAI client of the agent example talks
to a local server answering what the model would (`OPENAI_BASE_URL`), since no model is reachable here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolrag.server.config import load_api_config
from toolrag.server.models import SearchIn

from .conftest import copy_registry, json_http_server
from .mcp_support import free_port

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- not run by the README test: [^>]*-->\n)?```(\w+)\n(.*?)```", re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
SKIPPED_WITHOUT_MARKER = {  # the Quick start's two commands: CI runs `.ci/run`, this test `toolrag quickstart`
    "python3 -m venv .venv && . .venv/bin/activate && pip install . && toolrag quickstart\n",
    "bash .ci/run\n",
}


def blocks() -> list[tuple[str, str, bool]]:
    """(language, code, run) of every fenced block of the README, in order."""
    return [
        (language, code, not marker and code not in SKIPPED_WITHOUT_MARKER)
        for marker, language, code in BLOCK.findall(README.read_text(encoding="utf-8"))
    ]


def model_answers(path: str, body: dict[str, Any], raw: str) -> tuple[int, Any]:
    """What a model would answer the agent example: a call of the tracking tool, then the answer."""
    called = any(message.get("role") == "tool" for message in body["messages"])
    message: dict[str, Any]
    if called:
        message = {"role": "assistant", "content": "Your order A-1042 arrives tomorrow."}
    else:
        call = {"id": "call_1", "type": "function"}
        call["function"] = {"name": "shop__track_shipment", "arguments": json.dumps({"order_id": "A-1042"})}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "stop" if called else "tool_calls"}
    return 200, {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}


def test_every_readme_snippet_runs_as_printed(quickstart: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    copy_registry(quickstart[0], tmp_path)  # what `toolrag quickstart` leaves in the folder it runs in
    ran, port = 0, free_port()
    with json_http_server(model_answers) as url:
        env["OPENAI_BASE_URL"] = f"{url}/v1"
        for language, code, run in blocks():
            if language in ("toml", "python") and code.startswith("# ") and "\n" in code:
                named = code.split("\n", 1)[0][2:].strip()  # a file the next blocks use, e.g. `# shop_tools.py`
                if named.endswith((".toml", ".py")):
                    (tmp_path / named).write_text(code, encoding="utf-8")
            if not run or language not in ("python", "bash"):
                continue
            if language == "bash":  # a server the README starts listens on a free port here
                code = code.replace(":8080", f":{port}").replace("--port 8080", f"--port {port}")
            command = [sys.executable, "-c", code] if language == "python" else ["bash", "-e", "-c", code]
            done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
            failure = "\n".join([f"{language} block failed:", code, done.stdout[-2000:], done.stderr[-2000:]])
            assert done.returncode == 0, failure
            ran += 1
            if "toolrag.integrations" in code:  # a framework ran the tracking tool through toolrag's gateway
                assert "tomorrow" in done.stdout, failure
            if "result.tools_called" in code:  # the agent loop example
                assert "arrives tomorrow" in done.stdout and "shop.track_shipment" in done.stdout
    assert ran >= 4


def test_the_readme_api_example_is_a_valid_configuration_and_request(tmp_path: Path) -> None:
    api = next(code for language, code, _ in blocks() if language == "toml" and "[tokens." in code)
    (tmp_path / "toolrag-api.toml").write_text(api)
    os.environ.setdefault("SUPPORT_BOT_TOKEN", "support-bot-secret-0123")
    config = load_api_config(tmp_path / "toolrag-api.toml")
    assert config.tokens["support-bot"].role == "agent"
    curl = next(code for language, code, _ in blocks() if language == "bash" and "curl" in code)
    body = shlex.split(curl[curl.index("-d ") :].replace("\\\n", " "))[1]
    SearchIn.model_validate_json(body)


@pytest.mark.parametrize("page", [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "CHANGELOG.md"])
def test_every_relative_link_resolves(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in LINK.findall(text):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.name} links to {target}, which does not exist"
