"""`toolrag mcp ...`: the MCP gateway's commands."""

from __future__ import annotations

import logging
from collections import Counter
from contextlib import nullcontext
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.table import Table

from toolrag.cli.common import JsonOption, LogFormatOption, err, guarded, out, print_json

if TYPE_CHECKING:  # imported where used: the MCP SDK takes half a second to import
    from toolrag.mcp.config import GatewayConfig
    from toolrag.mcp.gateway import McpGateway

mcp_app = typer.Typer(help="Many MCP servers behind one small, permission-aware tool surface.", no_args_is_help=True)
ConfigOption = Annotated[
    str, typer.Option("--config", "-c", envvar="TOOLRAG_MCP_CONFIG", help="Gateway configuration (TOML).")
]


def _load(path: str) -> GatewayConfig:
    from toolrag.mcp.config import load_config

    return guarded(lambda: load_config(path))


def _gateway(settings: GatewayConfig) -> McpGateway:
    from toolrag.mcp.gateway import McpGateway

    return guarded(lambda: McpGateway.from_config(settings))


@mcp_app.command("list-servers")
def list_servers(config: ConfigOption = "toolrag-mcp.toml", as_json: JsonOption = False) -> None:
    """The configured upstream servers with their tools in the registry (active and quarantined)."""
    from toolrag.mcp.importer import source_of

    settings = _load(config)
    gateway = _gateway(settings)
    tools = gateway.registry.tools(include_inactive=True)
    active = Counter(t.source for t in tools if t.active)
    quarantined = Counter(p.server for p in gateway.registry.store.pins() if p.quarantined)
    rows = [
        {
            "server": name,
            "transport": server.transport,
            "target": server.url or " ".join([server.command or "", *server.args]),
            "enabled": server.enabled,
            "active_tools": active[source_of(name)],
            "quarantined": quarantined[name],
        }
        for name, server in settings.servers.items()
    ]
    if as_json:
        print_json(rows)
        return
    table = Table("server", "transport", "target", "enabled", "active tools", "quarantined")
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    out.print(table)


@mcp_app.command()
def sync(config: ConfigOption = "toolrag-mcp.toml", as_json: JsonOption = False) -> None:
    """Connect to every upstream once and import its tools (new, changed, removed, flagged)."""
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
                    "error": status.last_error,
                    "imported": report.imported,
                    "unchanged": len(report.unchanged),
                    "quarantined": report.quarantined,
                    "deactivated": report.deactivated,
                    "refused": report.refused,
                }
                for status, report in pairs
            ]
        )
        return
    table = Table("server", "state", "imported", "unchanged", "quarantined", "deactivated", "refused")
    for status, report in pairs:
        state = f"{status.state}: {status.last_error}" if status.last_error else status.state
        listed = [", ".join(names) or "0" for names in (report.quarantined, report.deactivated, report.refused)]
        table.add_row(status.name, state, str(len(report.imported)), str(len(report.unchanged)), *listed)
    out.print(table)
    if any(report.quarantined for _, report in pairs):
        out.print("review with `toolrag mcp approve --list`, then `toolrag mcp approve NAME ...`")


@mcp_app.command()
def approve(
    names: Annotated[list[str] | None, typer.Argument(help="Quarantined tools to approve.")] = None,
    config: ConfigOption = "toolrag-mcp.toml",
    show: Annotated[bool, typer.Option("--list", help="Only list quarantined tools and why.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Approve quarantined tool versions (new flagged tools, or approved tools whose upstream text changed)."""
    settings = _load(config)
    gateway = _gateway(settings)
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
    gateway = _gateway(settings)
    guarded(gateway.check)  # the registry is fit to serve, or a one-line reason
    if transport == "http":
        guarded(settings.check_http_tokens)
        err.print(f"toolrag MCP gateway on http://{host}:{port}/mcp", highlight=False)
        anyio.run(gateway.serve_http, host, port)
    else:
        anyio.run(gateway.serve_stdio)
