"""The command line as a first-hour user reads it (issue 33, section 7): help without placeholders on flags, one-line
summaries, every argument explained, the embedder choices as the error lists them, and tables that keep their
width when the output is not a terminal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from toolrag.cli.app import app
from toolrag.cli.common import EmbedderOption
from toolrag.embed import EMBEDDER_NAMES

runner = CliRunner()


def commands(group: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group, by its path (typer's own copy of click: its classes are not click's)."""
    group = group or typer.main.get_command(app)
    for name, command in group.commands.items():
        yield (*path, name), command
        if hasattr(command, "commands"):
            yield from commands(command, (*path, name))


def test_no_flag_shows_a_value_placeholder() -> None:
    """`--json <bool>` read as if the flag took a value."""
    for path, _ in commands():
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "120"})
        assert shown.exit_code == 0, path
        assert "<bool>" not in shown.stdout, " ".join(path)


def test_help_reads_as_click_and_unix_manuals_do() -> None:
    """Issue 50: typer 0.29 printed `<str>`, `<list[str]>`, `<int range> [1<=x<=5]` and `Usage: toolrag search
    [OPTIONS] {request}`; and the wide type column left `toolrag eval`'s help 26 characters wide at 80 columns."""
    for path, _ in commands():
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "120"}).stdout
        for typer_label in ("<str>", "<int", "<float", "<list[", "<path>", "[OPTIONS] {"):
            assert typer_label not in shown, (" ".join(path), typer_label)
    search = runner.invoke(app, ["search", "--help"], env={"COLUMNS": "80"}).stdout
    assert "Usage: toolrag search [OPTIONS] REQUEST" in search and "INTEGER (1-5)" in search
    assert " TEXT " in search
    evaluated = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "80"}).stdout
    assert "The bundled example catalog and" in evaluated  # one line of help, not three


def test_every_summary_is_one_line() -> None:
    """The command list broke summaries where the docstring broke its lines."""
    for path, command in commands():
        summary = command.short_help or command.help or ""  # a group's help is its summary
        assert summary and "\n" not in summary, " ".join(path)
    listed = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).stdout
    assert "search() delivers (hit, recall, empty results, tools returned), per language;" in listed


def test_every_argument_is_explained() -> None:
    """`toolrag tools add-example NAME TEXT` listed NAME with no help."""
    for path, command in commands():
        for param in command.params:
            if param.param_type_name == "argument":
                assert getattr(param, "help", None), f"{' '.join(path)} {param.name}"


def test_the_embedder_help_names_the_choices_the_error_names() -> None:
    help_text = next(m for m in EmbedderOption.__metadata__ if isinstance(m, typer.models.OptionInfo)).help
    assert help_text is not None
    for name in EMBEDDER_NAMES:
        assert name in help_text, name
    refused = runner.invoke(app, ["search", "x", "--embedder", "bert", "--store", "none.db"])
    assert refused.exit_code == 1


def test_eval_help_is_not_squeezed_into_a_narrow_column() -> None:
    """At 80 columns eval's option help was wrapped at about 20 characters."""
    shown = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "80"}).stdout
    line = next(line for line in shown.splitlines() if "--example" in line)
    help_start = line.index("The bundled")
    assert line.rindex("│") - help_start >= 24  # the help column: about 20 before


LONG = "warehouse.reconcile_inventory_counts_against_the_quarterly_supplier_ledger_and_flag_discrepancies"


def test_a_table_keeps_its_width_when_output_is_not_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped, rich squeezed tables to 80 columns and cut the tool's name, the key column."""
    monkeypatch.delenv("COLUMNS", raising=False)
    catalog = tmp_path / "tools.json"
    description = "Reconcile the inventory counts of every warehouse against the quarterly supplier ledger."
    catalog.write_text(json.dumps([{"name": LONG, "description": description}]))
    store = str(tmp_path / "t.db")
    assert runner.invoke(app, ["import", str(catalog), "--store", store]).exit_code == 0
    listed = runner.invoke(app, ["list", "--store", store])
    assert listed.exit_code == 0
    assert LONG in listed.stdout, listed.stdout
    assert any(len(line) > 80 for line in listed.stdout.splitlines())


def test_an_interval_of_one_point_becomes_a_bound() -> None:
    """`toolrag eval` printed "0.0%-0.0%" when no small talk was given a tool: the bootstrap of 40 zeros."""
    from toolrag.cli.evaluate import interval_text

    assert interval_text(0.0, 0.0, 0.0, 40) == "at most 7.5%"
    assert interval_text(1.0, 1.0, 1.0, 300, percent=False) == "at least 0.990"
    assert interval_text(0.05, 0.12, 0.08, 200) == "5.0%-12.0%"
