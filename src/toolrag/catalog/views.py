"""The views of a tool beyond its source's text, as edits of it: example requests and past tasks
(`ToolRegistry.examples`) and tenants' own descriptions (`ToolRegistry.descriptions`); and what a group of tools is
for (`ToolRegistry.describe_groups`).

An example request is one more view of its tool in retrieval (search/examples.py); a past task is one request given
to every tool its task needed; a tenant's description is what that tenant's principals read of the tool and one
more view their searches use. Each changes what a model reads or which tools a request reaches, so each is held for
review like the source's text while the registry asks for it (catalog/review.py). So is a group's description,
once scanned as a tool's text is (store/groups.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from toolrag.catalog.edits import Edited, ToolWriter
from toolrag.catalog.review import Origin, Proposal, login_name, named
from toolrag.errors import ConfigError
from toolrag.model import ExampleRequest, Tool
from toolrag.search.examples import PastTask, logged_past_tasks, logged_promotable
from toolrag.search.groups import checked_descriptions
from toolrag.store.base import Store
from toolrag.store.groups import GroupWrite

Source = Literal["operator", "usage"]


def written_subject(name: str, tenant: str | None) -> str:
    """A tool view's key among the bases of written examples: the tool, and the tenant whose description it is."""
    return name if tenant is None else f"{name}@{tenant}"  # '@' is in no tool name


class ExampleDesk:
    """Example requests and past tasks of one registry's tools (`ToolRegistry.examples`): added and removed as
    edits of their tools (held for review like any change of what retrieval matches a tool by, while the registry
    asks for it), and the usage log's candidates for them."""

    def __init__(self, writer: ToolWriter) -> None:
        self._writer = writer
        self._store = writer.store

    def add(
        self,
        name: str,
        text: str,
        tenant: str | None = None,
        source: Source = "operator",
        edited_by: str | None = None,
        origin: Origin = "python",
    ) -> Tool:
        """One more example request of `name` for `tenant`'s searches, or every tenant's when None."""
        return self._writer.add_example(name, text, tenant, source, edited_by, Proposal(origin, edited_by))

    def remove(
        self, name: str, text: str, tenant: str | None = None, edited_by: str | None = None, origin: Origin = "python"
    ) -> Tool:
        return self._writer.remove_example(name, text, tenant, edited_by, Proposal(origin, edited_by))

    def add_task(
        self,
        text: str,
        tools: Sequence[str],
        tenant: str | None = None,
        source: Source = "operator",
        edited_by: str | None = None,
        origin: Origin = "python",
    ) -> list[Tool]:
        """A past task: `text` becomes an example request of every one of `tools`, for `tenant`'s searches (None:
        every tenant's), in one transaction: a later request like it retrieves the whole set. `source` "usage":
        promoted from a logged session (`past_tasks`)."""
        return self._writer.add_task_example(tools, text, tenant, source, edited_by, Proposal(origin, edited_by))

    def write(
        self,
        name: str,
        tenant: str | None,
        texts: Sequence[str],
        written_for: str,
        edited_by: str | None = None,
        origin: Origin = "python",
    ) -> Tool:
        """The chat model's example requests of `name` for `tenant`'s searches (None: every tenant's), in place of
        those it wrote before for that tenant, in one new version; the other examples stay."""
        written = [
            ExampleRequest(text=text, tenant=tenant, source="written", written_for=written_for) for text in texts
        ]

        def replaced(current: Tool) -> dict[str, Any]:
            kept = [e for e in current.examples if not (e.source == "written" and e.tenant == tenant)]
            keys = {e.key for e in kept}
            fresh = [e for e in written if e.key not in keys]
            return {"examples": [*kept, *fresh]}

        return self._writer.edit(name, replaced, edited_by, Proposal(origin, edited_by))

    def asked_bases(self) -> dict[str, str]:
        """What the chat model was last asked with about each tool view (`written_subject`), hashed: a run asks
        again only where it changed (runtime/write_examples.py)."""
        return self._store.asked.bases("examples")

    def record_asked(self, asked: Sequence[tuple[str, str]]) -> None:
        """The (view, basis) the chat model was asked about and answered, whatever its answer kept."""
        self._store.asked.record("examples", asked)

    def promotable(self, name: str, days: int = 90) -> list[tuple[str | None, str]]:
        """(tenant, request) of logged requests after which the tool was called successfully in the same session,
        newest first, without those among its examples already: the candidates to promote to example requests."""
        return logged_promotable(self._store, self._writer.get(name), days)

    def past_tasks(self, days: int = 90, limit: int = 100) -> list[PastTask]:
        """The requests of the last `days` after which an agent's session called two or more tools successfully,
        with those tools, most frequent first, at most `limit`: candidates for `add_task`."""
        return logged_past_tasks(self._store, days, limit)


class TenantDescriptions:
    """Tenants' own descriptions of tools (`Tool.tenant_descriptions`): what a tenant's principals are shown and
    injected, and one more view of the tool their searches use; every other tenant keeps the source's text. Kept by
    syncs and re-imports; compare-and-set on `expected_version`. Scan a text first: `toolrag.mcp.review.described`."""

    def __init__(self, writer: ToolWriter) -> None:
        self._writer = writer

    def set(
        self,
        name: str,
        tenant: str,
        text: str,
        *,
        expected_version: int | None = None,
        edited_by: str | None = None,
        origin: Origin = "python",
    ) -> Edited:
        proposal = Proposal(origin, edited_by)
        return self._writer.set_tenant_description(name, tenant, text, expected_version, edited_by, proposal)

    def drop(
        self,
        name: str,
        tenant: str,
        *,
        expected_version: int | None = None,
        edited_by: str | None = None,
        origin: Origin = "python",
    ) -> Edited:
        """The principals of `tenant` get the source's description again."""
        proposal = Proposal(origin, edited_by)
        return self._writer.drop_tenant_description(name, tenant, expected_version, edited_by, proposal)


def describe_groups(
    store: Store, descriptions: Mapping[str, str | None], by: str | None, origin: Origin = "python"
) -> GroupWrite:
    """Write what groups of tools are for (None forgets one), audited with `by` (None: the user running this
    process). A model reads a group's description as what its tools are for (deferred loading's namespaces), and
    it moves the ranking: text aimed at the model is refused as it is found in a tool's (the MCP importer leaves
    such a server's own description out), and nothing is written; while the registry asks for review, a new
    description waits for an admin (`ToolRegistry.reviews.approve_group`)."""
    from toolrag.catalog.poisoning import scan  # the scanner's model loads only when a group is described

    for name, text in checked_descriptions(descriptions).items():
        if findings := scan(text) if text else []:
            raise ConfigError(f"group {name!r}: its description is written to the model ({'; '.join(findings)})")
    return store.groups.describe(descriptions, named(by) or login_name(), origin)
