"""The README and the docs as a new user reads them: every snippet runs as printed, in order, in an empty folder,
after the commands the page says to run first, and prints what the page shows; every relative link of the README and
the docs leads somewhere.

Blocks run: ```python (each in a fresh interpreter), ```bash (each line in a shell), and ```toml, ```python and
```yaml blocks whose first line is `# FILE` are written to FILE. A block right after `<!-- not run by the README test:
why -->` is skipped (only what CI itself runs: the Quick start's install and the development commands, a server left
running for a browser, a model no test reaches); a server a block starts listens on a free port instead of the
page's, and the block waits for it and stops it itself. A plain block right after `<!-- output of the block above -->`
is what the runnable block before it prints, compared within tolerances (tests/doc_output.py); after
`<!-- output of `COMMAND` -->`, what COMMAND prints when run there (the Quick start's `toolrag quickstart`). The HTTP
API's request body is also checked against the API's model. The OpenAI client of the agent example talks to a local
server answering what the model would (`OPENAI_BASE_URL`), since no model is reachable here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from toolrag.server.config import load_api_config
from toolrag.server.models import SearchIn

from .conftest import json_http_server
from .doc_output import Tolerances, command_of, mismatch, tolerances_of
from .mcp_support import free_port

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"(?:<!-- ([^>]*) -->\n)?```(\w*)\n(.*?)```", re.S)
NOT_RUN = "not run by the README test"
RUNNABLE = ("python", "bash")
LINK = re.compile(r"\]\(([^)\s]+)\)")
SKIPPED_WITHOUT_MARKER = {  # the Quick start's two commands: CI runs `.ci/run`, this test `toolrag quickstart`
    "python3 -m venv .venv && . .venv/bin/activate && pip install . && toolrag quickstart\n",
    "bash .ci/run\n",
}


@dataclass
class Block:
    language: str
    code: str
    run: bool
    shown_output: str | None = None
    tolerances: Tolerances = field(default_factory=Tolerances)


def blocks(page: Path = README) -> list[Block]:
    """Every fenced block of a page, in order, each with the output the page shows for it."""
    found: list[Block] = []
    for comment, language, code in FENCE.findall(page.read_text(encoding="utf-8")):
        tolerances = tolerances_of(comment)
        if tolerances is None:
            run = not comment.startswith(NOT_RUN) and code not in SKIPPED_WITHOUT_MARKER
            found.append(Block(language, code, run))
            continue
        command = command_of(comment)
        if command is not None:  # a command the page names in its text, run where its output is shown
            found.append(Block("bash", command + "\n", True, code, tolerances))
            continue
        before = found[-1] if found else None
        assert before and before.run and before.language in RUNNABLE, f"{page.name}: output of no runnable block"
        before.shown_output, before.tolerances = code, tolerances
    return found


def write_named_file(block: Block, folder: Path) -> None:
    """A block whose first line is `# NAME` is a file the next blocks use, e.g. `# shop_tools.py`."""
    if block.language in ("toml", "python", "yaml") and block.code.startswith("# ") and "\n" in block.code:
        named = block.code.split("\n", 1)[0][2:].strip()
        if named.endswith((".toml", ".py", ".yaml")):
            (folder / named).write_text(block.code, encoding="utf-8")


def run_blocks(page: Path, folder: Path, env: dict[str, str]) -> Iterator[tuple[Block, str]]:
    """Runs a page's blocks in `folder`, in order; yields each block run with what it printed."""
    port = free_port()
    for block in blocks(page):
        write_named_file(block, folder)
        if not block.run or block.language not in RUNNABLE:
            continue
        code = block.code
        if block.language == "bash":  # a server the page starts listens on a free port here
            code = code.replace(":8080", f":{port}").replace("--port 8080", f"--port {port}")
        command = [sys.executable, "-c", code] if block.language == "python" else ["bash", "-e", "-c", code]
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
        failure = "\n".join([f"{page.name}: {block.language} block failed:", code, done.stdout[-2000:]])
        assert done.returncode == 0, failure + "\n" + done.stderr[-2000:]
        yield block, done.stdout


def output_mismatches(page: Path, runs: Iterator[tuple[Block, str]]) -> list[str]:
    """Each block's shown output that differs from what it printed, as a diff; every block is run first."""
    found = []
    for block, printed in runs:
        if block.shown_output is not None:
            diff = mismatch(block.shown_output, printed, block.tolerances)
            if diff:
                found.append(f"{page.name}, the output of:\n{block.code}\n{diff}")
    return found


def docs_env() -> dict[str, str]:
    """A reader's shell: the installed `toolrag` on the PATH, a terminal wide enough for the tables."""
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    return {**os.environ, "OPENAI_API_KEY": "test-key", "PATH": path, "COLUMNS": "120"}


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


def test_every_readme_snippet_runs_and_prints_as_shown(tmp_path: Path) -> None:
    env = docs_env()
    ran: list[tuple[Block, str]] = []
    with json_http_server(model_answers) as url:
        env["OPENAI_BASE_URL"] = f"{url}/v1"
        for block, printed in run_blocks(README, tmp_path, env):
            ran.append((block, printed))
            if "toolrag.integrations" in block.code:  # a framework ran the tracking tool through toolrag's gateway
                assert "tomorrow" in printed, printed
            if "result.tools_called" in block.code:  # the agent loop example
                assert "arrives tomorrow" in printed and "shop.track_shipment" in printed
    assert len(ran) >= 4 and sum(block.shown_output is not None for block, _ in ran) >= 5
    mismatches = output_mismatches(README, iter(ran))
    assert not mismatches, "\n\n".join(mismatches)


@pytest.mark.parametrize("page", ["library.md", "console.md", "cli.md", "operations.md"])
def test_every_snippet_of_the_docs_runs_and_prints_as_shown(page: str, tmp_path: Path) -> None:
    """Each page on its own, in an empty folder: it creates whatever its blocks use."""
    env = docs_env()
    with json_http_server(model_answers) as url:
        env["OPENAI_BASE_URL"] = f"{url}/v1"
        mismatches = output_mismatches(ROOT / "docs" / page, run_blocks(ROOT / "docs" / page, tmp_path, env))
    assert not mismatches, "\n\n".join(mismatches)


def test_the_readme_api_example_is_a_valid_configuration_and_request(tmp_path: Path) -> None:
    api = next(block.code for block in blocks() if block.language == "toml" and "[tokens." in block.code)
    (tmp_path / "toolrag-api.toml").write_text(api)
    os.environ.setdefault("SUPPORT_BOT_TOKEN", "support-bot-secret-0123")
    config = load_api_config(tmp_path / "toolrag-api.toml")
    assert config.tokens["support-bot"].role == "agent"
    curl = next(block.code for block in blocks() if block.language == "bash" and "curl" in block.code)
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
