"""The package's face: what `import toolrag` exports, the one version every surface reports, and errors that carry
what they are about (as httpx's carry `.request` and `.response`)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

import toolrag
from toolrag import errors
from toolrag.catalog import load_catalog
from toolrag.embed import make_embedder
from toolrag.embed.ensemble import EnsembleEmbedder, Member
from toolrag.eval.dataset import load_benchmark

from .conftest import RETRIEVAL, SAMPLE_TOOLS, CountingEmbedder

ROOT = Path(__file__).resolve().parents[1]


def test_exported_members() -> None:
    """Every name in `__all__` resolves, and every error toolrag raises on purpose is among them."""
    for name in toolrag.__all__:
        assert getattr(toolrag, name) is not None, name
    raised = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, errors.ToolragError) and not name.startswith("_")
    }
    assert raised <= set(toolrag.__all__), f"not exported: {sorted(raised - set(toolrag.__all__))}"
    assert sorted(toolrag.__all__) == sorted({*toolrag._WHERE, "__version__"})
    assert "ConfigError" in toolrag.__all__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = toolrag.Nope  # type: ignore[attr-defined]


def test_the_version_is_the_same_everywhere(tmp_path: Path, embedder: CountingEmbedder) -> None:
    """The OpenAPI description and the MCP handshake said 0.1.0 while the package was 0.2.0."""
    from toolrag.mcp.config import GatewayConfig
    from toolrag.mcp.gateway import McpGateway
    from toolrag.server.app import create_app
    from toolrag.server.config import ApiConfig

    with toolrag.ToolRegistry(tmp_path / "t.db", embedder, RETRIEVAL) as registry:
        assert create_app(registry, ApiConfig()).openapi()["info"]["version"] == toolrag.__version__
        server = McpGateway(GatewayConfig(), registry).mcp_server(lambda ctx: None)  # type: ignore[arg-type,return-value]
        assert server.version == toolrag.__version__
    checked_in = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert checked_in["info"]["version"] == toolrag.__version__


def test_the_changelog_names_the_current_version_released() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    heading = f"\n## {toolrag.__version__} - "
    assert heading in changelog, "release the Unreleased section as the version in src/toolrag/_version.py"
    assert changelog.index("\n## Unreleased\n") < changelog.index(heading)


def test_a_missing_tool_names_itself(tmp_path: Path, embedder: CountingEmbedder) -> None:
    with toolrag.ToolRegistry(tmp_path / "t.db", embedder, RETRIEVAL) as registry:
        registry.register_many(SAMPLE_TOOLS[:2])
        with pytest.raises(toolrag.ToolNotFoundError) as missing:
            registry.get("no.such_tool")
        assert missing.value.name == "no.such_tool" and missing.value.version is None
        assert str(missing.value) == "no tool named 'no.such_tool'"
        name = SAMPLE_TOOLS[0].name
        with pytest.raises(toolrag.ToolNotFoundError) as no_version:
            registry.rollback(name, 7)
        assert (no_version.value.name, no_version.value.version) == (name, 7)
        with pytest.raises(KeyError):  # callers that caught KeyError still do
            registry.history("no.such_tool")


@pytest.mark.parametrize(
    ("suffix", "text", "line"),
    [
        (".yaml", "- name: a\n  description: first\n- name: b\n   description: [\n", 4),
        (".json", '[{"name": "a",\n "description": "d"},\n {"name" "b"}]', 3),
        (".jsonl", '{"name": "a", "description": "d"}\n\n{"name": "b", "description": }\n', 3),
    ],
)
def test_a_malformed_catalog_is_one_line_naming_file_and_line(
    tmp_path: Path, suffix: str, text: str, line: int
) -> None:
    """A malformed YAML catalog gave PyYAML's 8 lines (context, copied line, caret); now one, with its line."""
    path = tmp_path / f"tools{suffix}"
    path.write_text(text)
    with pytest.raises(toolrag.CatalogError) as bad:
        load_catalog(path)
    assert (bad.value.path, bad.value.line) == (path, line)
    assert "\n" not in str(bad.value) and f"line {line} " in str(bad.value) and str(path) in str(bad.value)


def test_an_invalid_catalog_entry_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "tools.jsonl"
    path.write_text('{"name": "a", "description": "d"}\n{"name": "has space", "description": "d"}\n')
    with pytest.raises(toolrag.CatalogError) as bad:
        load_catalog(path)
    assert (bad.value.path, bad.value.line) == (path, 2)


def test_a_benchmark_row_error_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "tools.jsonl").write_text('{"id": "a", "description": "d"}\n[1]\n')
    with pytest.raises(toolrag.CatalogError) as bad:
        load_benchmark(tmp_path)
    assert (bad.value.path, bad.value.line) == (tmp_path / "tools.jsonl", 2)


def test_an_unknown_embedder_is_a_toolrag_error_with_the_choices() -> None:
    with pytest.raises(toolrag.UnknownEmbedderError) as unknown:
        make_embedder("bert")
    assert unknown.value.name == "bert" and "minilm" in unknown.value.choices
    assert isinstance(unknown.value, ValueError) and isinstance(unknown.value, toolrag.ConfigError)


def test_a_retired_model_names_its_replacement() -> None:
    from toolrag.embed import embedder_name_for

    with pytest.raises(toolrag.UnknownModelError) as retired:
        embedder_name_for("all-minilm-l6-v2")
    assert (retired.value.model_id, retired.value.replacement) == ("all-minilm-l6-v2", "minilm")
    with pytest.raises(toolrag.ModelMismatchError) as unknown:
        embedder_name_for("word2vec")
    assert isinstance(unknown.value, toolrag.UnknownModelError) and unknown.value.replacement is None
    assert isinstance(unknown.value, ValueError)


def test_ensemble_weights_that_do_not_add_up_are_a_toolrag_error() -> None:
    minilm = make_embedder("minilm")
    with pytest.raises(toolrag.EnsembleWeightsError, match="add up to 1"):
        EnsembleEmbedder([Member(minilm, english=0.5, other=0.5), Member(minilm, english=0.2, other=0.5)])


def test_an_unsupported_store_url_carries_it() -> None:
    with pytest.raises(toolrag.StoreLocationError) as bad:
        toolrag.open_store("mysql://db/tools")
    assert bad.value.location == "mysql://db/tools"
    assert isinstance(bad.value, ValueError) and isinstance(bad.value, toolrag.StoreError)


def test_the_architecture_page_states_the_approximate_index_threshold() -> None:
    """docs/architecture.md said 120k after the threshold had moved to 200k."""
    from toolrag.search.config import ANN_MIN_TOOLS

    page = (ROOT / "docs" / "architecture.md").read_text()
    assert f"the approximate index past {ANN_MIN_TOOLS // 1000}k tools" in page
