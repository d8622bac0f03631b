"""A tenant's own description of a tool (`Tool.tenant_descriptions`): shown, injected and searched with for that
tenant's principals only; kept by syncs and re-imports; versioned, audited, compare-and-set; explained."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolrag import EditConflictError, InvalidToolError, Principal, ToolRegistry
from toolrag.inject.formats import FORMATS
from toolrag.model import SYNCED_SOURCE_PREFIX
from toolrag.runtime.toolbox import Toolbox

from .conftest import RETRIEVAL, CountingEmbedder, make_tool

ACME, GLOBEX = Principal(user="ann", tenant="acme"), Principal(user="gus", tenant="globex")
NOBODY = Principal.anonymous()
SOURCE = "Query rows of table T_CUST_ADDR by key K1."
ACMES = "Find a customer's postal address and phone number."
REQUEST = "what is the phone number and postal address of this customer"


@pytest.fixture
def registry(tmp_path: Path, embedder: CountingEmbedder) -> ToolRegistry:
    built = ToolRegistry(
        tmp_path / "described.db", embedder, RETRIEVAL.model_copy(update={"inject_all_below_tokens": 0})
    )
    built.register_many(
        [
            make_tool("crm.query", SOURCE, input_schema={"type": "object", "properties": {"key": {"type": "string"}}}),
            make_tool("weather.forecast", "Weather forecast for the next days for a city."),
            make_tool("mail.send", "Send an email to someone."),
            make_tool("contacts.search", "Search the address book for a person's contact details."),
            make_tool("hr.payslip", "Show an employee's payslip for a month.", tenants=["acme"]),
        ]
    )
    return built


def ranking(registry: ToolRegistry, principal: Principal, request: str = REQUEST) -> list[tuple[str, float]]:
    return [(r.name, r.score) for r in registry.rank(request, principal)]


def place(registry: ToolRegistry, principal: Principal, name: str = "crm.query") -> int:
    return [r.name for r in registry.rank(REQUEST, principal)].index(name)


def test_every_format_renders_the_tenants_text_for_its_principals_only(registry: ToolRegistry) -> None:
    registry.set_tenant_description("crm.query", "acme", ACMES, edited_by="ops")
    for fmt in FORMATS:
        acme, globex, anyone = (registry.schemas(["crm.query"], p, fmt)[0] for p in (ACME, GLOBEX, NOBODY))
        assert ACMES in str(acme) and SOURCE not in str(acme), fmt
        assert SOURCE in str(globex) and ACMES not in str(globex), fmt
        assert SOURCE in str(anyone) and ACMES not in str(anyone), fmt
    chosen = registry.select("query table T_CUST_ADDR rows by key", GLOBEX, k=1)
    assert chosen.results[0].name == "crm.query" and ACMES not in str(chosen.tools)
    assert ACMES not in chosen.results[0].card.purpose
    for_acme = registry.select(REQUEST, ACME, k=1)
    assert for_acme.results[0].name == "crm.query"
    assert for_acme.tools[0]["function"]["description"] == ACMES
    assert for_acme.results[0].card.purpose == ACMES


def test_toolboxes_and_other_tenants_reads_never_carry_another_tenants_text(registry: ToolRegistry) -> None:
    registry.set_tenant_description("crm.query", "acme", ACMES)
    assert Toolbox(registry, ACME).tools["crm.query"].description == ACMES
    globex = Toolbox(registry, GLOBEX).tools["crm.query"]
    assert globex.description == SOURCE and globex.tenant_descriptions == {}
    assert all(ACMES not in str(tool.model_dump()) for tool in registry.visible_tools(GLOBEX))
    assert registry.get("crm.query").seen_by("globex").tenant_descriptions == {}
    assert registry.get("crm.query").seen_by("acme").description == ACMES


def test_the_tenants_text_finds_the_tool_for_it_and_moves_no_other_ranking(registry: ToolRegistry) -> None:
    acme_before, globex_before, anyone_before = (ranking(registry, p) for p in (ACME, GLOBEX, NOBODY))
    acme_place = place(registry, ACME)
    registry.set_tenant_description("crm.query", "acme", ACMES)
    assert acme_place > 0 and place(registry, ACME) == 0  # the source's wording ranked it last
    assert [r.name for r in registry.search(REQUEST, ACME, k=1)] == ["crm.query"]
    # Another tenant's request in the override's own words ranks nothing higher than before, to the score.
    assert ranking(registry, GLOBEX) == globex_before
    assert ranking(registry, NOBODY) == anyone_before
    assert ranking(registry, GLOBEX, ACMES) == ranking(registry, Principal(tenant="initech"), ACMES)
    assert acme_before != ranking(registry, ACME)


def test_explain_says_which_description_was_used(registry: ToolRegistry) -> None:
    registry.set_tenant_description("crm.query", "acme", ACMES)
    acme = next(t for t in registry.explain(REQUEST, ACME).ranking if t.name == "crm.query")
    assert acme.description == "override for tenant acme" and acme.description_cosine is not None
    assert acme.example is None  # the tenant's description is not taken for an example request
    globex = next(t for t in registry.explain(REQUEST, GLOBEX).ranking if t.name == "crm.query")
    assert globex.description == "source" and globex.description_cosine is None


def test_it_is_versioned_audited_compare_and_set_and_dropped(registry: ToolRegistry) -> None:
    tool = registry.set_tenant_description("crm.query", "acme", f"  {ACMES}  ", expected_version=1, edited_by="ops")
    assert tool.version == 2 and tool.tenant_descriptions == {"acme": ACMES} and tool.description == SOURCE
    assert registry.store.audit_log(5, "crm.query")[0].detail == "description for tenant acme"
    with pytest.raises(EditConflictError):
        registry.set_tenant_description("crm.query", "acme", "Another text.", expected_version=1)
    assert registry.get("crm.query").tenant_descriptions == {"acme": ACMES}
    with pytest.raises(EditConflictError):
        registry.drop_tenant_description("crm.query", "acme", expected_version=1)
    dropped = registry.drop_tenant_description("crm.query", "acme", expected_version=2, edited_by="ops")
    assert dropped.version == 3 and dropped.tenant_descriptions == {}
    assert registry.schemas(["crm.query"], ACME, "mcp")[0]["description"] == SOURCE
    assert registry.store.audit_log(5, "crm.query")[0].detail == "description for tenant acme: the source's again"
    with pytest.raises(InvalidToolError, match="'crm.query' has no description for tenant 'acme'"):
        registry.drop_tenant_description("crm.query", "acme")


def test_blank_long_and_strangers_texts_are_refused(registry: ToolRegistry) -> None:
    with pytest.raises(InvalidToolError, match="the description for tenant 'acme' must not be blank"):
        registry.set_tenant_description("crm.query", "acme", "  \n ")
    with pytest.raises(
        InvalidToolError, match=r"the description for tenant 'acme' is 8,193 characters \(at most 8,192\)"
    ):
        registry.set_tenant_description("crm.query", "acme", "x" * 8193)
    with pytest.raises(InvalidToolError, match="tenant 'globex' may not use 'hr.payslip' \\(its tenants: acme\\)"):
        registry.set_tenant_description("hr.payslip", "globex", "Your payslip.")
    with pytest.raises(InvalidToolError, match="invalid tenant name"):
        registry.set_tenant_description("crm.query", " ", ACMES)
    assert registry.get("crm.query").version == 1 and registry.get("hr.payslip").version == 1


def test_a_sync_and_a_catalog_reimport_keep_it(registry: ToolRegistry) -> None:
    registry.set_tenant_description("crm.query", "acme", ACMES)
    registry.register_over([make_tool("crm.query", "Query rows of table T_CUST_ADDR by key K1 (v2).")])
    kept = registry.get("crm.query")
    assert kept.tenant_descriptions == {"acme": ACMES} and kept.description.endswith("(v2).")
    synced_source = f"{SYNCED_SOURCE_PREFIX}crm"
    upstream = make_tool("crm.query", "Query rows of T_CUST_ADDR (v3).", source=synced_source)
    synced = kept.synced(upstream)
    assert synced.tenant_descriptions == {"acme": ACMES} and synced.description == upstream.description
    assert registry.schemas(["crm.query"], ACME, "mcp")[0]["description"] == ACMES
