"""`toolrag tools write-examples`: example requests written by the operator's chat model (runtime/write_examples.py),
a command of `toolrag tools` kept apart from the tools' lifecycle."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from toolrag.cli.chat_models import (
    ApiKeyEnvOption,
    BaseUrlOption,
    MaxCallsOption,
    MaxTokensOption,
    ModelOption,
    ProviderOption,
)
from toolrag.cli.common import (
    DEFAULT_STORE,
    JsonOption,
    StoreOption,
    cli_user,
    guarded,
    open_registry,
    out,
    plural,
    print_json,
    progress_bar,
)
from toolrag.cli.lifecycle import tools_app


@tools_app.command("write-examples")
def write_examples_command(
    model: ModelOption,
    languages: Annotated[
        str, typer.Option("--languages", help="The users' languages: ISO 639 codes separated by commas (en,de,uk).")
    ] = "en",
    per_language: Annotated[
        int, typer.Option("--per-language", min=1, max=5, help="Example requests written in each language.")
    ] = 2,
    provider: ProviderOption = "openai",
    base_url: BaseUrlOption = None,
    api_key_env: ApiKeyEnvOption = None,
    max_calls: MaxCallsOption = 500,
    max_tokens: MaxTokensOption = 2_000_000,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count the calls and prompt tokens a run would make; ask nothing.")
    ] = False,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Have your chat model write example requests for each tool in your users' languages: more views of each
    tool in retrieval; only tools whose text changed are asked again."""
    from toolrag.runtime.chat_models import chat_model
    from toolrag.runtime.write_examples import RECORD, write_examples

    registry = open_registry(store)
    # A dry run only counts: it needs neither the provider's SDK nor a key.
    chat = None if dry_run else guarded(lambda: chat_model(provider, model, base_url, api_key_env, RECORD))
    wanted = languages.split(",")
    shown = not (as_json or dry_run)
    with progress_bar("writing example requests", len(registry.tools()), enabled=shown) as advance:
        run = guarded(
            lambda: write_examples(
                registry,
                chat,
                f"{provider}:{model}",
                wanted,
                per_language,
                max_calls,
                max_tokens,
                dry_run,
                lambda done, total: advance(1),
                started_by=cli_user(),
                origin="cli",
            )
        )
    if as_json:
        print_json(dataclasses.asdict(run))
        return
    bounds = f"{run.unchanged} unchanged, {run.left} left for a later run (--max-calls, --max-tokens)"
    if run.dry_run:
        out.print(
            f"a run would make {plural(run.asked, 'call')} to {run.model} ({run.prompt_tokens} prompt tokens);"
            f" {bounds}. Nothing was asked or written.",
            highlight=False,
        )
        return
    out.print(
        f"{plural(run.written, 'example request')} written by {run.model} in {plural(run.asked, 'call')}"
        f" ({run.prompt_tokens} prompt tokens); {bounds}; {run.dropped} refused, {run.failed} calls failed."
        " See them with `toolrag tools examples NAME`, remove one with `toolrag tools remove-example`.",
        highlight=False,
    )
    if run.stopped:
        out.print(f"The run stopped early: {run.stopped}", highlight=False)
    elif run.failure:
        out.print(f"The first failed call: {run.failure}", highlight=False)
