"""`toolrag api ...`: the HTTP API and dashboard."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from toolrag.cli.access import ClaimsOption, RuleArgument, ToolOption, show_access
from toolrag.cli.common import JsonOption, LogFormatOption, err, guarded

api_app = typer.Typer(help="The HTTP API (FastAPI) and the dashboard.", no_args_is_help=True)
ApiConfigOption = Annotated[
    str, typer.Option("--config", "-c", envvar="TOOLRAG_API_CONFIG", help="API configuration (TOML).")
]


@api_app.command()
def serve(
    config: ApiConfigOption = "toolrag-api.toml",
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    keep_alive: Annotated[
        int | None,
        typer.Option(
            help="Seconds an idle client connection stays open (default: the \\[http] section of the config)."
        ),
    ] = None,
    log_format: LogFormatOption = "text",
) -> None:
    """Serve the API; the dashboard is at /console/dashboard, the OpenAPI description at /docs and /openapi.json."""
    import logging

    import uvicorn

    from toolrag.tracing import configure_logging

    configure_logging(logging.INFO, json_lines=log_format == "json")

    from toolrag.access.guard import listening_socket, server_config
    from toolrag.server.config import load_api_config
    from toolrag.server.serve import build_api

    settings = guarded(lambda: load_api_config(config))
    if keep_alive is not None:
        settings.http.keep_alive_seconds = keep_alive
    sock = guarded(lambda: listening_socket(host, port))
    app = guarded(lambda: build_api(settings))
    err.print(f"toolrag API on http://{host}:{port} (console and dashboard: /console/, docs: /docs)", highlight=False)
    uvicorn.Server(server_config(app, host, port, settings.http)).run(sockets=[sock])


@api_app.command()
def access(
    rule: RuleArgument = None,
    claims: ClaimsOption = None,
    tool: ToolOption = None,
    config: ApiConfigOption = "toolrag-api.toml",
    as_json: JsonOption = False,
) -> None:
    """What a rule's principal, or a token with these claims, may use through this API (as GET /access/RULE/tools
    and POST /access/resolve answer admin tokens)."""
    from toolrag.server.config import load_api_config

    settings = guarded(lambda: load_api_config(config))
    show_access(settings.policy(), settings.store, settings.embedder, rule, claims, tool, as_json)


@api_app.command()
def openapi() -> None:
    """Print the OpenAPI description (the one checked in as docs/openapi.json)."""
    sys.stdout.write(json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n")


def openapi_document() -> dict[str, object]:
    from toolrag.server.app import create_app
    from toolrag.server.config import ApiConfig

    class _Nothing:  # the description depends on no registry state
        usage = None

    return create_app(_Nothing(), ApiConfig()).openapi()  # type: ignore[arg-type]
