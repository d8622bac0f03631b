"""A PostgreSQL connection string: a URL (`postgresql://...`) or libpq's key=value form (`host=db dbname=agents`).

libpq reads it, so libpq's own parser (`psycopg.conninfo.conninfo_to_dict`) decides what it is and whether it can be
read; toolrag only takes its own parameters out (`schema`, `vector_index`, which libpq does not know), leaving every
other byte as written, and shows it without secrets. A string libpq cannot read is refused before any connection:
libpq's errors repeat the part they could not read, which may be a password (a generated one with a `%` in it).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from toolrag.errors import StoreError

TOOLRAG_PARAMETERS = ("schema", "vector_index")
UNREADABLE = "<a connection string that cannot be read>"
HIDDEN = "<hidden>"
MAX_REASON_CHARS = 1000  # of an error's first line: each secret is looked for in it (a location may hold thousands)
# Parameters a message may show; every other one's value is hidden (a password, or a mistyped `passwrd=`).
_SHOWN = frozenset(
    {
        *TOOLRAG_PARAMETERS,
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "sslmode",
        "connect_timeout",
        "application_name",
        "target_session_attrs",
        "load_balance_hosts",
    }
)
_URL_SCHEMES = ("postgresql://", "postgres://")
_LOOKS_LIKE_OTHER_URL = re.compile(r"[\w+.-]*://")  # a scheme of no store (`POSTGRESQL://`, `https://`)
# libpq's key=value form, as its parser reads it: ASCII white space between pairs; a value quoted (`\` escaping any
# character) or running to the next white space (`\` escaping one, a space too, or ending the string).
_SPACE = "[ \t\n\r\f\v]"
_QUOTED = r"'(?:[^'\\]|\\.)*'"
_BARE = r"(?:[^ \t\n\r\f\v'\\]|\\(?:.|$))(?:[^ \t\n\r\f\v\\]|\\(?:.|$))*"
_PAIR = re.compile(rf"{_SPACE}*(\w+){_SPACE}*={_SPACE}*({_QUOTED}|{_BARE}|)", re.ASCII | re.DOTALL)
_LIBPQ_KEYS = ("host", "hostaddr", "port", "dbname", "user", "password", "service", "sslmode", "passfile")
_LOOKS_LIKE_KEY_VALUE = re.compile(rf"{_SPACE}*(?:{'|'.join(_LIBPQ_KEYS)}){_SPACE}*=", re.ASCII | re.IGNORECASE)


def is_connection_string(location: str) -> bool:
    """Whether `location` names a PostgreSQL database rather than a SQLite file: a postgresql:// URL, or a key=value
    string libpq reads (`user=x.db` is one: write such a file as `./user=x.db`). Without psycopg, a string that
    starts like one is taken for one (opening it then asks for the `postgres` extra, never makes a file of it)."""
    if _is_url(location):
        return True
    if "=" not in location or _LOOKS_LIKE_OTHER_URL.match(location):
        return False
    try:
        return bool(parsed(split_parameters(location)[0]))
    except (ImportError, StoreError):  # no psycopg, or one libpq cannot read: refused, never made a file
        return bool(_LOOKS_LIKE_KEY_VALUE.match(location))


def shown_location(location: str) -> str:
    """A store location as a message may show it: a connection string redacted, a URL of another kind by its scheme
    alone (`POSTGRESQL://` and `postgresql+psycopg://` are no URLs libpq reads, and may hold a password), a path as
    it is."""
    if is_connection_string(location):
        return redacted_url(location)
    if "://" in location:
        return location.partition("://")[0] + "://..."
    return location


def _is_url(location: str) -> bool:
    """A URL as libpq tells one: by its start alone (a key=value value may hold `://`)."""
    return location.startswith(_URL_SCHEMES)


def parsed(plain: str) -> dict[str, str]:
    """What libpq reads of a connection string without toolrag's parameters; StoreError (never repeating it) when
    libpq cannot read it. ImportError without psycopg."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    if "\x00" in plain:  # libpq reads a C string: what follows a NUL would be shown, and not read
        raise StoreError(f"{UNREADABLE} (a NUL in it): nothing was opened")
    try:
        read = {key: str(value) for key, value in conninfo_to_dict(plain).items()}
    except (ProgrammingError, UnicodeError) as exc:  # its message repeats the string from its first quote on
        reason = str(exc).splitlines()[0].split('"', 1)[0].rstrip(" :") if isinstance(exc, ProgrammingError) else ""
        raise StoreError(f"{UNREADABLE} ({reason or 'not text libpq reads'}): nothing was opened") from None
    if _is_url(plain) and _misread(*_url_parts(plain)[1:]):
        raise StoreError(
            f"{UNREADABLE} (an `@`, `/` or `:` in its password? write them %40, %2F and %3A): nothing was opened"
        )
    return read


def split_parameters(location: str) -> tuple[str, dict[str, str]]:
    """The connection string without toolrag's own parameters, every other byte as written, and their values (the
    last one given of each)."""
    if _is_url(location):
        prefix, account, rest = _url_parts(location)
        base, mark, query = rest.partition("?")
        items = [item for item in query.split("&") if item] if mark else []
        found = {unquote(key): unquote(value) for key, _, value in (i.partition("=") for i in items)}
        kept = [item for item in items if unquote(item.partition("=")[0]) not in TOOLRAG_PARAMETERS]
        user = f"{account}@" if account is not None else ""
        ours = {key: value for key, value in found.items() if key in TOOLRAG_PARAMETERS}
        return f"{prefix}{user}{base}{'?' + '&'.join(kept) if kept else ''}", _names(ours)
    pairs = _key_value_pairs(location)
    if pairs is None or not any(match.group(1) in TOOLRAG_PARAMETERS for match in pairs):
        return location, {}
    # A match never ends in white space it does not hold (an escaped space): only what precedes a pair is dropped.
    kept_text = " ".join(m.group(0).lstrip(" \t\n\r\f\v") for m in pairs if m.group(1) not in TOOLRAG_PARAMETERS)
    found = {m.group(1): _value(m.group(2)) for m in pairs if m.group(1) in TOOLRAG_PARAMETERS}
    return kept_text, _names(found)


def _names(found: dict[str, str]) -> dict[str, str]:
    """toolrag's parameters, each a name: one holding `=` took the next pair for its value (libpq reads `schema=
    password=...` so when a template left it empty), and is refused without being repeated."""
    for key, value in found.items():
        if not re.fullmatch(r"[\w.$-]+", value):
            raise StoreError(f"{key}= in the connection string holds no name (a value left empty?): nothing was opened")
    return found


def redacted_url(location: str) -> str:
    """The connection string as a message may show it: its user but no password, and the values of known harmless
    parameters only; a string libpq cannot read is not shown at all."""
    try:
        plain, found = split_parameters(location)
        parsed(plain)
    except ImportError:
        pass  # no connection is made without psycopg: show it as written, secrets hidden
    except StoreError:
        return UNREADABLE
    extra = [f"{key}={value}" for key, value in found.items()]
    if not _is_url(plain):
        pairs = _key_value_pairs(plain) or []
        shown = [f"{m.group(1)}={_shown(m.group(1), m.group(2))}" for m in pairs]
        return " ".join(shown + extra)
    prefix, account, rest = _url_parts(plain)
    base, _, query = rest.partition("?")
    user = account.split(":", 1)[0] + "@" if account is not None else ""
    if _misread(account, rest):  # only without psycopg, which refuses it (`parsed`)
        return f"{prefix}{HIDDEN}"
    parameters = (item.partition("=") for item in query.split("&") if item)
    items = [f"{key}={_shown(unquote(key), value)}" for key, _, value in parameters]
    return f"{prefix}{user}{base}{'?' if items or extra else ''}{'&'.join(items + extra)}"


def failure_reason(exc: BaseException, location: str | None = None) -> str:
    """The first line of an error, without any secret of `location`."""
    reason = str(exc).strip().splitlines()[0][:MAX_REASON_CHARS] if str(exc).strip() else type(exc).__name__
    for secret in sorted(_secrets(location), key=len, reverse=True) if location else ():
        reason = reason.replace(secret, HIDDEN)
    return reason


def _secrets(location: str) -> set[str]:
    """Each secret `location` holds, as written, decoded, and as libpq reads it: what a message must not repeat."""
    try:
        plain, _ = split_parameters(location)
    except StoreError:
        plain = location
    written: set[str] = set()
    if _is_url(plain):
        _, account, rest = _url_parts(plain)
        query = rest.partition("?")[2]
        if account is not None and ":" in account:
            written.add(account.split(":", 1)[1])
        if _misread(account, rest):
            base = rest.partition("?")[0]
            misread = rest.rpartition("@")[0] if "@" in rest else base
            written.update(piece for piece in re.split("[:/@,?&=]", misread) if piece)
        items = (item.partition("=") for item in query.split("&") if item)
        written.update(value for key, _, value in items if _secret(unquote(key), value))
    else:
        pairs = _key_value_pairs(plain) or []
        written.update(m.group(2) for m in pairs if _secret(m.group(1), m.group(2)))
    try:
        read = {value for key, value in parsed(plain).items() if _secret(key, value)}
    except (ImportError, StoreError):
        read = set()
    whole = written | {unquote(value) for value in written} | {_value(value) for value in written} | read
    # A server repeats a piece of a value it refuses (`options='-c statement_timeout=...'`): each piece is hidden too.
    pieces = {piece for value in whole for piece in re.split(r"[\s=,]+", value) if len(piece) >= 4}
    # Not an empty value (replacing it would put a mark between every letter), nor one of a letter or two, which
    # would mark every such letter of a message and shows little.
    return {secret for secret in whole | pieces if len(secret) >= 3}


def _misread(account: str | None, rest: str) -> bool:
    """Whether a URL's hosts and database may hold pieces of a password: libpq ends the user part at the password's
    first `@`, or at a `/` before it, and reads what follows as hosts, a port and a database (`app:p@ss@host/db`,
    `app:pw/rest@host/db`): an `@` there, an `@` anywhere after a `/` that left no user part (`app:1/x?a=b@host`:
    `?user=me@corp` is written `me%40corp`), or a port that is no number."""
    base = rest.partition("?")[0]
    if "@" in base or (account is None and "@" in rest):
        return True
    for host in base.partition("/")[0].split(","):
        port = (host.partition("]")[2] if host.startswith("[") else host.partition(":")[1] + host.partition(":")[2])[1:]
        if port and not (port.isascii() and port.isdigit()):
            return True
    return False


def _secret(key: str, value: str) -> bool:
    """Whether a value must not be shown: any but a known harmless parameter's, and one holding `=` (a harmless
    parameter left empty takes the next pair for its value: `user= password=...`)."""
    return bool(value) and (key not in _SHOWN or "=" in value)


def _url_parts(url: str) -> tuple[str, str | None, str]:
    """A URL's `scheme://`, its user part (None when it has none) and the rest, as libpq splits them: the user
    part runs to the first `@`, if no `/` comes before it (a password may hold `?`, `#` or `:`)."""
    scheme, _, after = url.partition("://")
    end = next((index for index, char in enumerate(after) if char in "@/"), len(after))
    if end < len(after) and after[end] == "@":
        return f"{scheme}://", after[:end], after[end + 1 :]
    return f"{scheme}://", None, after


def _key_value_pairs(text: str) -> list[re.Match[str]] | None:
    """libpq's key=value form as its pairs, each match's text as written; None when it is not that form."""
    pairs: list[re.Match[str]] = []
    at, end = 0, len(text.rstrip(" \t\n\r\f\v"))
    while at < end:
        match = _PAIR.match(text, at)
        if match is None:
            return None
        pairs.append(match)
        at = match.end()
    return pairs


def _value(written: str) -> str:
    """A key=value string's value as libpq reads it: unquoted, its escapes undone."""
    inner = written[1:-1] if written.startswith("'") and written.endswith("'") and len(written) > 1 else written
    return re.sub(r"\\(.)", r"\1", inner, flags=re.DOTALL)


def _shown(key: str, value: str) -> str:
    return HIDDEN if _secret(key, value) else value
