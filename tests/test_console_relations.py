"""A tool's relations on its console page (issue 32 §1): each with its source, strength and why; an admin confirms,
rejects and lifts an inferred or learned one there, in Chromium; a reader sees only its own tenant's learned
relations and no buttons, never a rejected learned one, and its forged post is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolrag import ToolRegistry
from toolrag.search import complete
from toolrag.server.app import create_app

from .conftest import CountingEmbedder, counted_inferences
from .test_api import serving
from .test_console import ACME_READER, ADMIN, GLOBEX_READER, browser, console_config, form_token, session_of, signed_in
from .test_learned_relations import RELATED, sessions, shop

LEARNED_WHY = "6 of 6 acme sessions that called orders.search called orders.refund next"


@pytest.fixture
def learned_shop(tmp_path: Path, embedder: CountingEmbedder) -> Iterator[tuple[str, ToolRegistry]]:
    """The shop, with acme's sessions taught that orders.refund follows orders.search."""
    registry = ToolRegistry(tmp_path / "shop.db", embedder, RELATED)
    registry.register_many(shop())
    registry.store.usage.record([], sessions(*[("orders.search", "orders.refund")] * 6))
    assert len(registry.relations.learn().relations) == 1
    with registry, serving(create_app(registry, console_config())) as url:
        yield url, registry


def rows(page: Any) -> list[list[str]]:
    return [row.split("\t") for row in page.locator("#relations tr[data-other]").all_inner_texts()]


def test_an_admin_confirms_rejects_and_lifts_a_learned_relation_on_the_tools_page(
    learned_shop: tuple[str, ToolRegistry],
) -> None:
    url, registry = learned_shop
    with browser() as chromium:
        page: Any = signed_in(chromium, url, ADMIN)
        page.goto(f"{url}/console/tools/orders.search")
        assert rows(page) == [["orders.refund", "related", "usage", "1.00", LEARNED_WHY, "confirm reject"]]
        page.locator('#relations tr[data-other="orders.refund"] button', has_text="reject").click()
        assert page.url == f"{url}/console/tools/orders.search#relations"
        assert rows(page) == [["orders.refund", "related", "rejected", "0.00", "rejected by ops", "lift"]]
        assert [(v.tool, v.other, v.verdict, v.decided_by) for v in registry.store.relations.verdicts()] == [
            ("orders.search", "orders.refund", "rejected", "ops")
        ]
        page.locator('#relations tr[data-other="orders.refund"] button', has_text="lift").click()
        assert rows(page) == []  # a rejection forgets what was learned: the next run learns it again
        registry.relations.learn()
        page.reload()
        page.locator('#relations tr[data-other="orders.refund"] button', has_text="confirm").click()
        assert rows(page) == [["orders.refund", "related", "confirmed", "1.00", "confirmed by ops", "lift"]]
    actions = [entry.action for entry in registry.store.audit_log(10)]
    assert actions[:4] == ["relation_confirmed", "relations_learned", "relation_lifted", "relation_rejected"]


def test_a_reader_sees_its_own_tenants_learned_relations_without_buttons_and_cannot_forge_a_verdict(
    learned_shop: tuple[str, ToolRegistry],
) -> None:
    url, registry = learned_shop
    with browser() as chromium:
        acme: Any = signed_in(chromium, url, ACME_READER)
        acme.goto(f"{url}/console/tools/orders.search")
        assert rows(acme) == [["orders.refund", "related", "usage", "1.00", LEARNED_WHY]]
        assert acme.locator("#relations button").count() == 0
        globex: Any = signed_in(chromium, url, GLOBEX_READER)
        globex.goto(f"{url}/console/tools/orders.search")
        assert rows(globex) == []  # what acme's sessions taught is acme's
        registry.relations.decide("orders.search", "orders.refund", "rejected", "root")
        for reader in (acme, globex):  # a rejection would name what some tenant's sessions taught
            reader.reload()
            assert rows(reader) == []
    cookies = session_of(url, ACME_READER)
    csrf = form_token(httpx.get(f"{url}/console/tools/orders.search", cookies=cookies).text)
    forged = httpx.post(
        f"{url}/console/tools/orders.search/relations/orders.refund",
        data={"csrf": csrf, "decision": "confirm"},
        cookies=cookies,
        headers={"origin": url},
    )
    assert forged.status_code == 403 and "only admins change tools" in forged.text
    assert [v.verdict for v in registry.store.relations.verdicts()] == ["rejected"]


def test_a_verdict_on_a_relation_the_registry_never_found_is_named_on_a_console_page(
    learned_shop: tuple[str, ToolRegistry],
) -> None:
    url, registry = learned_shop
    cookies = session_of(url, ADMIN)
    csrf = form_token(httpx.get(f"{url}/console/tools/orders.search", cookies=cookies).text)
    refused = httpx.post(
        f"{url}/console/tools/orders.search/relations/weather.forecast",
        data={"csrf": csrf, "decision": "confirm"},
        cookies=cookies,
        headers={"origin": url},
    )
    assert refused.status_code == 422
    assert "no inferred or learned relation from orders.search to weather.forecast" in refused.text
    assert registry.store.relations.verdicts() == []


def test_issue48_a_readers_tool_page_sets_off_no_inference_while_search_does_not_use_it(
    learned_shop: tuple[str, ToolRegistry], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R4-3: the tool page inferred requirements over the whole catalog for any reader, with inference off."""
    url, registry = learned_shop
    inferred = counted_inferences(monkeypatch)
    assert registry.config.infer_requirements is False
    page = httpx.get(f"{url}/console/tools/orders.search", cookies=session_of(url, ACME_READER))
    assert page.status_code == 200 and "orders.refund" in page.text  # its learned relation is still shown
    assert inferred == [] and not registry.snapshot().derived.peek(complete.INFERRED, None)[0]
    assert httpx.get(f"{url}/console/tools/orders.search", cookies=session_of(url, ADMIN)).status_code == 200
    assert inferred == [1]  # an admin judges what inference would add
