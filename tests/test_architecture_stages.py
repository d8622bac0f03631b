"""Issue 51: a search is a short list of stages a newcomer can read, and no class but the facade grows past 25
methods (the next feature lands in the stage or room it belongs to)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from toolrag.search.pipeline import STAGES

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "toolrag"
MAX_METHODS = 25
FACADE = ("registry.py", "ToolRegistry")


def test_the_stages_are_listed_in_order_and_each_module_exists() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "toolrag.search", "--stages"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert [line.split(".", 1)[1].split("  ")[0].strip() for line in printed] == [stage.name for stage in STAGES]
    assert [s.name for s in STAGES] == ["read", "filter", "gather and fuse", "decide", "complete the set", "render"]
    for stage in STAGES:
        for module in stage.module.split(", "):
            assert (SOURCE / module).is_file(), module
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "python -m\n                    toolrag.search --stages" in architecture


def test_no_class_but_the_facade_has_more_than_25_methods() -> None:
    crowded = []
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and (path.name, node.name) != FACADE:
                methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
                if len(methods) > MAX_METHODS:
                    crowded.append(f"{path.relative_to(SOURCE)}:{node.name} has {len(methods)} methods")
    assert crowded == []


def test_the_facade_stays_thin() -> None:
    lines = (SOURCE / "registry.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 350, f"registry.py has {lines} lines: put the new feature's body in its room, not the facade"
