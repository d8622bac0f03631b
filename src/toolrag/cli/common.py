"""What every `toolrag` command shares: consoles, options, error handling, progress bars."""

from __future__ import annotations

import inspect
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer
from rich import table as rich_table
from rich.console import Console, ConsoleDimensions, RenderableType
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from toolrag.errors import ToolragError

if TYPE_CHECKING:  # imported where used: the command line starts without them
    from toolrag.model import Principal, SearchResult
    from toolrag.registry import ToolRegistry

PIPED_WIDTH = 1000  # wider than any table: a table is then as wide as its content
# Control characters but the line break, and the invisible ones that reorder or hide text (bidirectional overrides,
# zero-width characters): what a model, an MCP server or a user wrote must neither move the terminal's cursor,
# recolour it (`\x1b[32mverified by admin`), nor reorder what an admin reads after it.
_UNSEEN = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u00ad\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\U000e0000-\U000e007f]"
)


def plain(text: str) -> str:
    """The text with its unseen characters written as escapes (`\\x1b`, `\\u202e`), so an admin sees them."""
    return _UNSEEN.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), text)


class Table(rich_table.Table):
    """A rich table whose text cells and title are text, never markup: they hold what models, MCP servers and users
    wrote, and `[/x]` in a reason or an example request ended the command in a traceback. A styled cell is a
    `Text`."""

    def __init__(self, *headers: str, title: str | Text | None = None, **options: Any) -> None:
        shown_title = Text(plain(title)) if isinstance(title, str) else title
        columns = (rich_table.Column(header=Text(plain(header))) for header in headers)
        super().__init__(*columns, title=shown_title, **options)

    def add_row(self, *cells: RenderableType | None, **options: Any) -> None:
        super().add_row(*(Text(plain(cell)) if isinstance(cell, str) else cell for cell in cells), **options)


def shown(text: str) -> str:
    """Text to put into `marked` markup: its brackets escaped, its unseen characters written as escapes."""
    return escape(plain(text))


def marked(markup: str) -> Text:
    """Text styled by rich markup written here (`[bold]...[/]`), whose inserts went through `shown`. Only this is
    read as markup: a string printed is printed as it is."""
    return Text.from_markup(markup, emoji=False)


class _Console(Console):
    """Output that is not a terminal (a pipe, a file, CI) goes to programs and wide windows: rich's 80 columns there
    squeezed tables and cut their key column. Without a terminal (and without COLUMNS) tables keep their width.

    A string printed is text, never markup, its unseen characters written as escapes (`plain`): what a model, an MCP
    server or a user wrote reached the admin's terminal inside f-strings (`[/x]` ended `toolrag show` in a traceback,
    `\x1b[2J` cleared the screen). Styled output is a `Text` (`marked`)."""

    def print(self, *objects: Any, **options: Any) -> None:
        texts = [
            self.render_str(plain(item), markup=False, highlight=options.get("highlight"))
            if isinstance(item, str)
            else item
            for item in objects
        ]
        super().print(*texts, **options)

    @property  # type: ignore[misc]  # read-only here: toolrag never sets a console's size
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self._width is None and not self.is_terminal and "COLUMNS" not in self._environ:
            return ConsoleDimensions(PIPED_WIDTH, size.height)
        return size


# Typer 0.29's help labels, in the words of click and of Unix tools' manuals, which newcomers know.
_TYPE_LABELS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN", "path": "PATH"}


def _help_in_click_style() -> None:
    """Typer 0.29 prints `<bool>` beside every on/off flag, as if it took a value, types as `<str>`,
    `<list[str]>` and `<int range>`, and a required argument as `{request}` in the usage line: read as syntax to
    type. Flags show no type, types read TEXT, INTEGER, INTEGER RANGE (as click prints them), and arguments
    REQUEST (issue 50). Each patch applies only where typer has what it replaces."""
    from typer.core import TyperArgument, TyperOption

    for kind in (TyperOption, TyperArgument):
        shown = getattr(kind, "display_type_rich", None)
        if shown is None:
            continue

        def display_type_rich(self: Any, ctx: Any, _shown: Any = shown) -> str | None:
            if getattr(self, "is_flag", False):
                return None
            label = _shown(self, ctx)
            return _click_label(label, self.min, self.max) if isinstance(label, str) else label

        kind.display_type_rich = display_type_rich  # type: ignore[method-assign]
        if hasattr(kind, "_get_number_range_help_str"):  # the range is in the type's label: `INTEGER (1-5)`
            kind._get_number_range_help_str = lambda self: ""  # type: ignore[method-assign]
    if hasattr(TyperArgument, "_usage_display_name"):

        def usage_name(self: Any) -> str:
            name = (self.metavar or self.name or "").upper()
            name = name if self.required else f"[{name}]"
            return name + ("..." if self.nargs != 1 else "")

        TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]


def _click_label(label: str, low: Any = None, high: Any = None) -> str:
    """`<str>` -> TEXT, `<list[str]>` -> TEXT (the option repeats), `<int range>` with bounds 1 and 5 ->
    INTEGER (1-5) (narrow: a wide type column left the help 26 characters at 80 columns), choices as `[a|b]`;
    anything else as it was."""
    if not (label.startswith("<") and label.endswith(">")):
        return label
    inner = label[1:-1]
    if inner.startswith("list[") and inner.endswith("]"):
        inner = inner[5:-1]
    base, _, rest = inner.partition(" ")
    if base not in _TYPE_LABELS:
        return f"[{inner}]" if "|" in inner else inner.upper()
    if rest != "range":
        return _TYPE_LABELS[base]
    bounds = f"{low}-{high}" if low is not None and high is not None else f">={low}" if low is not None else f"<={high}"
    return f"{_TYPE_LABELS[base]} ({bounds})"


_help_in_click_style()
out = _Console(soft_wrap=True, emoji=False)  # `:lock:` in a tool's description is text, not an emoji
err = _Console(stderr=True, soft_wrap=True, emoji=False)
T = TypeVar("T")

DEFAULT_STORE = "toolrag.db"
StoreOption = Annotated[
    str,
    typer.Option(
        "--store",
        envvar="TOOLRAG_STORE",
        help="Registry file, sqlite:///PATH or postgresql://USER@HOST/DB[?schema=NAME].",
    ),
]
EmbedderOption = Annotated[
    str,
    typer.Option(
        "--embedder",
        envvar="TOOLRAG_EMBEDDER",
        # The names of embed/__init__.py's EMBEDDER_NAMES (not imported here: it loads the models' modules).
        help="auto (the model the registry was indexed with), default, use+minilm, use, minilm, e5 or"
        " openai:MODEL[@BASE_URL].",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
ToolNameArgument = Annotated[str, typer.Argument(help="The tool's name, as `toolrag list` shows it.")]


def one_line_summaries(commands: typer.Typer) -> None:
    """A command list shows each command's first paragraph with its line breaks, so summaries broke mid-sentence:
    each command's summary is its first paragraph on one line (the command's own --help keeps the paragraphs)."""
    for command in commands.registered_commands:
        if command.short_help is None:
            text = command.help or inspect.getdoc(command.callback) or ""
            command.short_help = " ".join(text.split("\n\n")[0].split())
    for group in commands.registered_groups:
        if group.typer_instance is not None:
            one_line_summaries(group.typer_instance)


def fail(message: str) -> None:
    err.print(marked(f"[bold red]error:[/] {shown(message)}"), highlight=False)
    raise typer.Exit(1)


LogFormatOption = Annotated[
    Literal["text", "json"],
    typer.Option("--log-format", help="json: one JSON object per line, with the request id and the trace id."),
]


# The start of a hash `tools pending` and `groups pending` show and a decision accepts: 64 bits, beyond grinding a
# text to match.
HASH_PREFIX = 16


def full_hash(given: str | None, waiting: Callable[[], str]) -> str | None:
    """The `waiting` text's hash when `given` is its start as a listing shows it (HASH_PREFIX characters or more);
    else `given` as it is, which the decision compares (another text waiting now: a conflict)."""
    if given is None or len(given) < HASH_PREFIX:
        return given
    whole = waiting()
    return whole if whole and whole.startswith(given) else given


def cli_user() -> str | None:
    """Who a command's writes and decisions are recorded as: the user running it (None when it has no name)."""
    from toolrag.catalog.review import login_name  # the command line starts without the catalog's imports

    return login_name()


def guarded(action: Callable[[], T]) -> T:
    """Run a command body, turning toolrag's errors into one line on stderr and exit code 1."""
    try:
        return action()
    except (ToolragError, ValueError, OSError) as exc:
        fail(str(exc))
        raise AssertionError("unreachable") from None


def open_registry(store: str, embedder: str = "auto", create: bool = False) -> ToolRegistry:
    """The registry at `store`, closed when the command ends; only commands that add tools (`create=True`) may
    start a new one."""
    from toolrag.registry import ToolRegistry

    return closed_with_command(guarded(lambda: ToolRegistry(store, embedder, create=create)))


_OPENED: list[ToolRegistry] = []  # what the running command opened: closed when it ends


def closed_with_command(registry: ToolRegistry) -> ToolRegistry:
    """Close `registry` (its usage log flushed, its database connections released) when the running command
    ends, however it ends (`close_opened_registries`, which the app's callback registers): a command run
    in-process, as tests and programs embedding the CLI do, leaks no database connection."""
    _OPENED.append(registry)
    return registry


def close_opened_registries() -> None:
    while _OPENED:
        _OPENED.pop().close()


@contextmanager
def progress_bar(label: str, total: int, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr; `advance(n)` moves it by n."""
    if not enabled or total == 0:
        yield lambda n: None
        return
    # The label (a file's name) is the task's description, shown as text: a column's own text is a format template.
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task(plain(label), total=total)
        yield lambda n: progress.advance(task, n)


ScopesOption = Annotated[
    list[str] | None,
    typer.Option("--scopes", "--scope", help="Scopes the user holds: repeat the option or separate with commas."),
]


def principal_from(user: str | None, tenant: str | None, scopes: list[str] | None) -> Principal:
    from toolrag.model import Principal

    held = frozenset(s.strip() for given in scopes or [] for s in given.split(",") if s.strip())
    return Principal(user=user, tenant=tenant, scopes=held)


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 search`, `2 searches`."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def table_or_lines(table: Table, rows: list[list[str]]) -> None:
    """A table on a terminal; tab-separated lines, never cut, when the output goes to a pipe or a file."""
    if out.is_terminal:
        for row in rows:
            table.add_row(*row)
        out.print(table)
    else:
        for row in rows:
            sys.stdout.write("\t".join(plain(cell.replace("\n", " ")) for cell in row) + "\n")


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def results_table(request: str, results: list[SearchResult]) -> Table:
    table = Table("tool", "confidence", "cosine", "lexical", "why", title=request, title_justify="left")
    if not results:
        table.add_row(Text("(none: no tool here serves this, or it needs none)", style="dim"), "", "", "", "")
    for result in results:
        why = []
        if result.signals.name_match:
            why.append("named")
        if result.signals.routed_category:
            why.append(f"route:{result.signals.routed_category}")
        if result.signals.always_included:
            why.append("always")
        if result.signals.reformulation:
            why.append(f"second chance: {result.signals.reformulation}")
        if needed := result.needed_as():
            why.append(needed)
        if result.signals.also_needs:
            why.append(f"also needs {', '.join(result.signals.also_needs)}")
        if result.signals.related_to:
            why.append(f"related to {result.signals.related_to}")
        if not result.signals.calibrated:
            why.append("confidence uncalibrated for this language")
        table.add_row(
            result.name,
            f"{result.score:.2f}",
            f"{result.signals.dense:.2f}",
            f"{result.signals.lexical:.2f}",
            ", ".join(why),
        )
    return table
