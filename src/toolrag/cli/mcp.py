"""`toolrag mcp ...`: the MCP gateway's commands."""

from __future__ import annotations

import logging
import os
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.text import Text

from toolrag.cli.access import ClaimsOption, RuleArgument, ToolOption, show_access
from toolrag.cli.common import (
    JsonOption,
    LogFormatOption,
    Table,
    cli_user,
    closed_with_command,
    err,
    guarded,
    out,
    plural,
    print_json,
)
from toolrag.errors import ToolragError
from toolrag.limits import UNCOMPRESSED, read_at_most, uncompressed

if TYPE_CHECKING:  # imported where used: the MCP SDK takes half a second to import
    from toolrag.mcp.config import GatewayConfig
    from toolrag.mcp.gateway import McpGateway
    from toolrag.mcp.importer import SyncReport
    from toolrag.mcp.upstream import UpstreamStatus
    from toolrag.store.switches import DisabledServer

mcp_app = typer.Typer(help="Many MCP servers behind one small, permission-aware tool surface.", no_args_is_help=True)
ConfigOption = Annotated[
    str, typer.Option("--config", "-c", envvar="TOOLRAG_MCP_CONFIG", help="Gateway configuration (TOML).")
]


def _load(path: str) -> GatewayConfig:
    from toolrag.mcp.config import load_config

    return guarded(lambda: load_config(path))


def _gateway(settings: GatewayConfig) -> McpGateway:
    from toolrag.mcp.gateway import McpGateway

    gateway = guarded(lambda: McpGateway.from_config(settings))
    closed_with_command(gateway.registry)
    return gateway


@mcp_app.command("list-servers")
def list_servers(config: ConfigOption = "toolrag-mcp.toml", as_json: JsonOption = False) -> None:
    """The configured upstream servers with their tools in the registry (active and quarantined)."""
    from toolrag.mcp.importer import source_of

    settings = _load(config)
    gateway = _gateway(settings)
    tools = gateway.registry.tools(include_inactive=True)
    active = Counter(t.source for t in tools if t.active)
    quarantined = Counter(p.server for p in gateway.registry.store.pins() if p.quarantined)
    switched_off = {d.server: d for d in gateway.registry.store.switches.disabled()}
    rows = [
        {
            "server": name,
            "transport": server.transport,
            "target": server.url or " ".join([server.command or "", *server.args]),
            "enabled": server.enabled,
            "active_tools": active[source_of(name)],
            "quarantined": quarantined[name],
            "disabled": _disabled_json(switched_off.get(name)),
        }
        for name, server in settings.servers.items()
    ]
    if as_json:
        print_json(rows)
        return
    table = Table("server", "transport", "target", "enabled", "active tools", "quarantined", "disabled")
    for row in rows:
        *shown, disabled = row.values()
        table.add_row(*(str(v) for v in shown), _disabled_text(disabled))
    out.print(table)


def _disabled_json(switch: DisabledServer | None) -> dict[str, Any] | None:
    if switch is None:
        return None
    at = switch.disabled_at.isoformat(timespec="seconds")
    return {"by": switch.disabled_by, "at": at, "reason": switch.reason}


def _disabled_text(disabled: Any) -> str:
    """`toolrag mcp disable`'s switch as one cell: by whom, since when, why; empty when the server is on."""
    if not disabled:
        return ""
    by = f" by {disabled['by']}" if disabled["by"] else ""
    return f"since {disabled['at']}{by}" + (f": {disabled['reason']}" if disabled["reason"] else "")


ServerArgument = Annotated[
    str, typer.Argument(help="The upstream server's name, as `toolrag mcp list-servers` shows it.")
]


@mcp_app.command()
def disable(
    server: ServerArgument,
    config: ConfigOption = "toolrag-mcp.toml",
    reason: Annotated[str | None, typer.Option("--reason", help="Why: kept with the switch and audited.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Switch an upstream server off without removing it from the configuration: the gateway lists none of its
    tools and refuses calls to them until `toolrag mcp enable`."""
    from toolrag.mcp.switches import disable_server, servers_in

    settings = _load(config)
    gateway = _gateway(settings)
    store = gateway.registry.store
    changed = guarded(lambda: disable_server(store, server, servers_in(store, settings.servers), cli_user(), reason))
    if as_json:
        print_json({"server": server, "disabled": True, "changed": changed})
    else:
        out.print(f"disabled {server}" if changed else f"{server} was disabled already", highlight=False)


@mcp_app.command()
def enable(server: ServerArgument, config: ConfigOption = "toolrag-mcp.toml", as_json: JsonOption = False) -> None:
    """Switch a disabled upstream server on again: its tools come back at the gateway's next request."""
    from toolrag.mcp.switches import enable_server, servers_in

    settings = _load(config)
    gateway = _gateway(settings)
    store = gateway.registry.store
    changed = guarded(lambda: enable_server(store, server, servers_in(store, settings.servers), cli_user()))
    if as_json:
        print_json({"server": server, "disabled": False, "changed": changed})
    else:
        out.print(f"enabled {server}" if changed else f"{server} was not disabled", highlight=False)


@mcp_app.command()
def access(
    rule: RuleArgument = None,
    claims: ClaimsOption = None,
    tool: ToolOption = None,
    config: ConfigOption = "toolrag-mcp.toml",
    as_json: JsonOption = False,
) -> None:
    """What a principal, or a token with these claims, may find and call through this gateway."""
    settings = _load(config)
    show_access(settings.policy(), settings.store, settings.embedder, rule, claims, tool, as_json)


@mcp_app.command()
def sync(config: ConfigOption = "toolrag-mcp.toml", as_json: JsonOption = False) -> None:
    """Connect to every upstream once and import its tools (new, changed, removed, flagged). Exit code 2 when an
    upstream was not synced (down, or not up by the start deadline): the others' tools are imported all the same."""
    import anyio

    from toolrag.mcp.importer import SyncReport

    settings = _load(config)
    gateway = _gateway(settings)
    with err.status("connecting to the upstream servers", spinner="dots") if not as_json else nullcontext():
        reports = guarded(lambda: anyio.run(gateway.sync_once))
    pairs = [(status, reports.get(status.name) or SyncReport(status.name)) for status in gateway.pool.statuses()]
    if as_json:
        print_json(
            [
                {
                    "server": status.name,
                    "state": status.state,
                    "error": status.operators_error,
                    "imported": report.imported,
                    "unchanged": len(report.unchanged),
                    "quarantined": report.quarantined,
                    "deactivated": report.deactivated,
                    "refused": report.refused,
                    "rejected": report.rejected,
                }
                for status, report in pairs
            ]
        )
    else:
        _print_sync(pairs)
    _exit_unless_synced([status for status, _ in pairs])


def _print_sync(pairs: list[tuple[UpstreamStatus, SyncReport]]) -> None:
    table = Table("server", "state", "imported", "unchanged", "quarantined", "deactivated", "refused")
    for status, report in pairs:
        state = f"{status.state}: {status.operators_error}" if status.last_error else status.state
        listed = [", ".join(names) or "0" for names in (report.quarantined, report.deactivated, report.refused)]
        table.add_row(status.name, state, str(len(report.imported)), str(len(report.unchanged)), *listed)
    out.print(table)
    rejected = [name for _, report in pairs for name in report.rejected]
    if rejected:
        out.print(f"left out as rejected: {', '.join(rejected)} (`toolrag mcp reject --lift NAME` to review again)")
    if any(report.quarantined for _, report in pairs):
        out.print("review with `toolrag mcp approve --list`, then `toolrag mcp approve NAME ...`")


def _exit_unless_synced(statuses: list[UpstreamStatus]) -> None:
    """Exit code 2, as `mcp status` has, with one line on stderr, when an upstream was not synced."""
    failed = [status for status in statuses if status.state != "up"]
    if not failed:
        return
    named = "; ".join(f"{s.name} ({s.state}" + (f": {s.operators_error})" if s.last_error else ")") for s in failed)
    err.print(f"{len(failed)} of {len(statuses)} upstreams not synced: {named}", highlight=False)
    raise typer.Exit(2)


@mcp_app.command()
def approve(
    names: Annotated[list[str] | None, typer.Argument(help="Quarantined tools to approve.")] = None,
    config: ConfigOption = "toolrag-mcp.toml",
    show: Annotated[bool, typer.Option("--list", help="Only list quarantined tools and why.")] = False,
    server: Annotated[
        str | None, typer.Option("--server", help="Approve every quarantined tool of this upstream server.")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="With --server: approve without asking.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Approve quarantined tool versions (new flagged tools, or approved tools whose upstream text changed)."""
    settings = _load(config)
    gateway = _gateway(settings)
    if server is not None and not show:
        if names:
            err.print("name tools or give --server, not both")
            raise typer.Exit(2)
        _approve_server(gateway, server, yes, as_json)
        return
    if show or not names:
        pending = [p for p in gateway.registry.store.pins() if p.quarantined]
        rows = [
            {
                "tool": p.tool,
                "kind": "new" if p.approved_hash is None else "changed",
                "findings": list(p.findings),
                "description": p.pending.description if p.pending else "",
            }
            for p in pending
        ]
        if as_json:
            print_json(rows)
            return
        table = Table("tool", "kind", "findings", "new description", title=f"{len(rows)} quarantined")
        for row in rows:
            table.add_row(str(row["tool"]), str(row["kind"]), "\n".join(row["findings"]), str(row["description"]))
        out.print(table)
        return
    approved = guarded(lambda: gateway.importer.approve(names))
    if as_json:
        print_json({"approved": approved})
    else:
        out.print(f"approved {', '.join(approved)}")


def _approve_server(gateway: McpGateway, server: str, yes: bool, as_json: bool) -> None:
    """Show what waits of `server`, ask, and approve exactly that: a sync that changes a tool meanwhile makes it
    a conflict (nothing approved), not an approval of text nobody saw."""
    from toolrag.mcp.importer import server_quarantined

    waiting = guarded(lambda: server_quarantined(gateway.registry, server))
    if not yes:
        table = Table("tool", "kind", "text hash", "findings", "new description", title=f"{len(waiting)} to approve")
        for pin in waiting:
            kind = "new" if pin.approved_hash is None else "changed"
            description = pin.pending.description if pin.pending else ""
            table.add_row(pin.tool, kind, str(pin.pending_hash)[:12], "\n".join(pin.findings), description)
        err.print(table)
        if not typer.confirm(f"approve these {plural(len(waiting), 'tool')} of {server}?", err=True):
            err.print("nothing approved")
            raise typer.Exit(1)
    reviewed = {pin.tool: str(pin.pending_hash) for pin in waiting}
    approved = guarded(lambda: gateway.importer.approve_server(server, reviewed))
    if as_json:
        print_json({"server": server, "approved": approved})
    else:
        out.print(f"approved {plural(len(approved), 'tool')} of {server}: {', '.join(approved)}")


@mcp_app.command()
def reject(
    names: Annotated[list[str], typer.Argument(help="Quarantined tools to reject (with --lift: rejected tools).")],
    config: ConfigOption = "toolrag-mcp.toml",
    lift: Annotated[
        bool, typer.Option("--lift", help="Forget the rejections: the next sync quarantines again.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Reject quarantined tool versions; while a server publishes the same text, syncs leave it out."""
    settings = _load(config)
    gateway = _gateway(settings)
    action = gateway.importer.lift if lift else gateway.importer.reject
    decided = guarded(lambda: action(names))
    if as_json:
        print_json({"lifted" if lift else "rejected": decided})
    else:
        out.print(f"{'lifted the rejection of' if lift else 'rejected'} {', '.join(decided)}")


@mcp_app.command()
def serve(
    config: ConfigOption = "toolrag-mcp.toml",
    transport: Annotated[Literal["stdio", "http"], typer.Option(help="stdio, or streamable HTTP.")] = "stdio",
    host: Annotated[str, typer.Option(help="Address to listen on (http).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (http).")] = 8765,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log imports and reconnections to stderr.")] = False,
    log_format: LogFormatOption = "text",
) -> None:
    """Run the gateway as an MCP server: find_tools and call_tool over every configured upstream."""
    import anyio

    from toolrag.tracing import configure_logging

    configure_logging(logging.INFO if verbose else logging.WARNING, json_lines=log_format == "json")
    settings = _load(config)
    sock = None
    if transport == "http":  # the port is taken before the registry is opened: in use, nothing starts
        from toolrag.access.guard import listening_socket

        guarded(settings.check_http_tokens)
        sock = guarded(lambda: listening_socket(host, port))
    gateway = _gateway(settings)
    guarded(gateway.check)  # the registry is fit to serve, or a one-line reason
    if sock is not None:
        err.print(f"toolrag MCP gateway on http://{host}:{port}/mcp", highlight=False)
        anyio.run(gateway.serve_http, host, port, sock)
    else:
        anyio.run(gateway.serve_stdio)


# -- status -------------------------------------------------------------------------------------------------------

HEALTH_TIMEOUT_SECONDS = 10.0
HEALTH_ANSWER_BYTES = 8 * 1024 * 1024  # a gateway's health is a few kB an upstream: read no further
TokenEnvOption = Annotated[
    str,
    typer.Option("--token-env", help="The environment variable holding a bearer token of the gateway (with --url)."),
]


class StatusError(ToolragError):
    """The state of the upstreams could not be had: the gateway is unreachable, refused the token, or answered
    something else than a toolrag gateway's /health."""


@dataclass
class UpstreamHealth:
    """One upstream as `GET /health` of a gateway describes it (mcp/gateway.py `McpGateway.health`)."""

    server: str
    state: str
    since: datetime
    tools: int = 0
    reconnects: int = 0
    last_import: datetime | None = None
    error: str | None = None

    @property
    def up(self) -> bool:
        return self.state == "up"

    def as_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "state": self.state,
            "since": self.since.isoformat(timespec="seconds"),
            "tools": self.tools,
            "reconnects": self.reconnects,
            "last_import": self.last_import.isoformat(timespec="seconds") if self.last_import else None,
            "error": self.error,
        }


@dataclass
class GatewayHealth:
    """What `GET /health` answers (the fields `mcp status` shows), or the same measured here by connecting."""

    ready: bool
    servers: list[UpstreamHealth] = field(default_factory=list)

    @property
    def failing(self) -> list[UpstreamHealth]:
        """Down, or connecting again after a failure (a gateway retries with backoff): not those connecting for the
        first time."""
        return [s for s in self.servers if s.state == "down" or (not s.up and s.error is not None)]


def health_url(url: str) -> str:
    """`/health` of a gateway given by its base URL or by its MCP endpoint (what clients are configured with)."""
    if not url.startswith(("http://", "https://")):
        raise StatusError(f"--url {url!r} must start with http:// or https://")
    base = url.rstrip("/")
    return f"{base.removesuffix('/mcp')}/health"


def fetch_health(url: str, token_env: str, timeout: float = HEALTH_TIMEOUT_SECONDS) -> GatewayHealth:
    """`GET /health` of a running HTTP gateway with the bearer token in `$token_env`."""
    import httpx
    from pydantic import TypeAdapter, ValidationError

    target = health_url(url)
    token = os.environ.get(token_env)
    headers = {"Authorization": f"Bearer {token}"} if token else {}  # without one: still tell unreachable from 401
    try:
        with httpx.stream("GET", target, headers={**headers, **UNCOMPRESSED}, timeout=timeout) as streamed:
            plain = uncompressed(streamed.headers.get("Content-Encoding"))
            body = read_at_most(streamed.iter_raw(), HEALTH_ANSWER_BYTES, timeout) if plain else None
            response = httpx.Response(streamed.status_code, headers=streamed.headers, content=body or b"")
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        reason = str(exc) or type(exc).__name__
        raise StatusError(
            f"cannot reach the gateway at {target}: {reason} (is `toolrag mcp serve --transport http` running there?)"
        ) from None
    if response.status_code in (401, 403):
        if not token:
            raise StatusError(
                f"no token: set {token_env} to the bearer token of one of the gateway's [principals] (or name another"
                " variable with --token-env)"
            )
        raise StatusError(
            f"the gateway refused the token in {token_env} ({response.status_code}: {_detail(response)}): set it to"
            " the token of one of the gateway's [principals]"
        )
    if body is None:
        raise StatusError(
            f"{target} answered over {HEALTH_ANSWER_BYTES:,} bytes, compressed, or slower than {timeout:.0f} s:"
            " not a toolrag gateway's health"
        )
    if response.status_code != 200:
        raise StatusError(f"{target} answered {response.status_code}: {_detail(response)}")
    try:
        return TypeAdapter(GatewayHealth).validate_json(response.content)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(top)"
        raise StatusError(f"{target} does not answer as a toolrag gateway does ({where}: {first['msg']})") from None


def _detail(response: Any) -> str:
    """The reason a toolrag server gives in its error bodies (`{"detail": ...}`), else the start of the body."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail else response.text[:200].strip() or response.reason_phrase


def probe_upstreams(settings: GatewayConfig) -> GatewayHealth:
    """Connect to every enabled upstream now and report how its first attempt went, without opening the registry:
    nothing is imported or written. Waits until each has answered its tool listing or failed once (the upstreams'
    own readiness), at most the configuration's `start_deadline_seconds`."""
    import anyio

    from toolrag.mcp.upstream import UpstreamPool

    counts: dict[str, int] = {}

    async def count_only(server: str, tools: list[Any], instructions: str | None) -> None:
        counts[server] = len(tools)  # the only thing kept of a listing: the gateway's importer is never involved

    async def first_attempts() -> dict[str, UpstreamStatus]:
        pool = UpstreamPool(settings, count_only)
        seen: dict[str, UpstreamStatus] = {}

        async def record(name: str) -> None:
            upstream = pool.upstreams[name]
            await upstream.attempted.wait()
            # Taken as the first attempt ends: a later retry may have succeeded by the deadline.
            seen[name] = upstream.status()

        async with anyio.create_task_group() as group:
            await pool.run(group)
            with anyio.move_on_after(settings.start_deadline_seconds):
                async with anyio.create_task_group() as waiting:
                    for name in pool.upstreams:
                        waiting.start_soon(record, name)
            group.cancel_scope.cancel()  # disconnects every upstream
        # An upstream still connecting at the deadline is shown as it is then.
        return {name: seen.get(name) or upstream.status() for name, upstream in pool.upstreams.items()}

    statuses = anyio.run(first_attempts)
    servers = [
        UpstreamHealth(s.name, s.state, s.since, counts.get(s.name, s.tools), s.reconnects, None, s.operators_error)
        for s in statuses.values()
    ]
    return GatewayHealth(ready=all(server.up for server in servers), servers=servers)


@mcp_app.command("status")
def status_command(
    config: ConfigOption = "toolrag-mcp.toml",
    url: Annotated[
        str | None,
        typer.Option(
            "--url", help="A running HTTP gateway (http://HOST:PORT): ask its /health instead of connecting here."
        ),
    ] = None,
    token_env: TokenEnvOption = "TOOLRAG_TOKEN",
    as_json: JsonOption = False,
) -> None:
    """Each upstream's state: of a running gateway (--url), or connecting to every enabled upstream of --config now
    (nothing is imported, the registry is not opened). Exit code 2 when an upstream is down or failed and is
    reconnecting (without --url: when one is not up)."""
    if url is not None:
        health = guarded(lambda: fetch_health(url, token_env))
        failing = health.failing
    else:
        settings = _load(config)
        with err.status("connecting to the upstream servers", spinner="dots") if not as_json else nullcontext():
            health = guarded(lambda: probe_upstreams(settings))
        failing = [server for server in health.servers if not server.up]
    if as_json:
        source = {"gateway": health_url(url)} if url else {"config": config}
        print_json(source | {"ready": health.ready, "servers": [s.as_json() for s in health.servers]})
    else:
        _print_health(health, url, config)
    if failing:
        raise typer.Exit(2)


def _print_health(health: GatewayHealth, url: str | None, config: str) -> None:
    source = f"gateway {health_url(url).removesuffix('/health')}" if url else f"upstreams of {config}, connected now"
    table = Table(
        "server", "state", "since", "tools", "reconnects", "last import", "error", title=source, caption="times in UTC"
    )
    for server in health.servers:
        table.add_row(
            server.server,
            Text(server.state, style=_STATE_COLOURS.get(server.state, "yellow")),
            _when(server.since),
            str(server.tools),
            str(server.reconnects),
            _when(server.last_import) if server.last_import else "",
            server.error or "",
        )
    out.print(table)
    up = sum(1 for server in health.servers if server.up)
    if url:
        out.print(f"ready: {'yes' if health.ready else 'no'} ({up} of {plural(len(health.servers), 'upstream')} up)")
    elif not health.servers:
        out.print(f"no enabled upstream in {config}")
    else:
        out.print(f"{up} of {plural(len(health.servers), 'upstream')} up (nothing was imported)")


_STATE_COLOURS = {"up": "green", "down": "red"}


def _when(moment: datetime) -> str:
    """A time in UTC: the time of day when it is today, else date and time."""
    moment = moment.astimezone(UTC)
    return f"{moment:%H:%M:%S}" if moment.date() == datetime.now(UTC).date() else f"{moment:%Y-%m-%d %H:%M:%S}"
