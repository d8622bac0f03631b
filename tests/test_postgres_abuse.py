"""What another role of the same PostgreSQL can do to a registry it has no rights on (the eighth security review).

PostgreSQL lets every role connect to a new database (PUBLIC holds CONNECT), and any role that connects may send a
notification on any channel and take any advisory lock, whatever it may read. The registry's own channel and locks
must therefore decide nothing by themselves: a notification is a hint to read the generation again, and writers
serialize on a lock only the registry's own roles can take."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from toolrag import Principal, SearchConfig, StoreError, ToolRegistry, open_store
from toolrag.model import utc_now
from toolrag.store import postgres
from toolrag.store.base import AuditEntry
from toolrag.store.conninfo import (
    MAX_REASON_CHARS,
    failure_reason,
    is_connection_string,
    parsed,
    redacted_url,
    split_parameters,
)
from toolrag.store.relations import ProposedRelation
from toolrag.usagelog.config import MonitorConfig

from .conftest import in_schema
from .test_doctor import doctor, registry_check
from .test_snapshot import WordEmbedder

CONFIG = SearchConfig(inject_all_below_tokens=0, cache_entries=0, save_snapshots_from=None)
STRANGER = Principal(user="mallory", tenant="evil")
WIRE = {"name": "wire_money", "description": "wire money transfer to a bank account"}
WEATHER = {"name": "get_weather", "description": "weather forecast for a city"}


@pytest.fixture
def url(postgres_url: str) -> str:
    return in_schema(postgres_url, f"abuse_{uuid.uuid4().hex[:10]}")


@pytest.fixture
def stranger_url(postgres_url: str) -> Iterator[str]:
    """A role that may log in and nothing more: no right on any registry's schema."""
    role = f"stranger_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    parts = urlsplit(postgres_url)
    yield urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}"))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _eventually(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _found(registry: ToolRegistry, principal: Principal) -> list[str]:
    return [found.name for found in registry.rank(WIRE["description"], principal, 5)]


@pytest.mark.parametrize("payload", ["\u00b2", "99999999999", "-1", "1e9"])
def test_a_strangers_notification_never_freezes_what_another_process_serves(
    url: str, stranger_url: str, payload: str
) -> None:
    """The listener took the generation from the payload: `'²'` (a digit to `isdigit`, not to `int`) killed its
    thread, and a large number moved the generation past the database's; either way a tool restricted later in
    another process stayed ranked (and callable) for a tenant that lost it, until a restart."""
    writer = ToolRegistry(url, WordEmbedder(), CONFIG)
    server = ToolRegistry(url, WordEmbedder(), CONFIG)
    writer.register(WIRE, WEATHER)
    assert "wire_money" in _found(server, STRANGER)
    listener = server.store._generations  # type: ignore[attr-defined]
    assert _eventually(lambda: listener.value is not None)  # listening
    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(stranger_url, autocommit=True) as stranger:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            stranger.execute(sql.SQL("SELECT count(*) FROM {}.tools").format(sql.Identifier(schema)))
        channel = sql.Identifier(postgres._channel_of(schema))
        stranger.execute(sql.SQL("NOTIFY {}, {}").format(channel, sql.Literal(payload)))
    writer.register({**WEATHER, "description": "weather forecast for a town"})  # announced after the forgery
    written = writer.store._read_generation()  # type: ignore[attr-defined]
    assert _eventually(lambda: listener.value == written)
    _found(server, STRANGER)
    writer.register({**WIRE, "tenants": ["acme"]})
    assert _eventually(lambda: "wire_money" not in _found(server, STRANGER))
    assert "wire_money" not in [tool.name for tool in server.visible_tools(STRANGER)]
    writer.close()
    server.close()


def test_a_strangers_advisory_locks_hold_no_write_and_no_opening(url: str, stranger_url: str) -> None:
    """Writers and openers took advisory locks of fixed keys, database-wide: any role that may connect held them and
    every write, every opening of a registry, and the reads queued behind a waiting write, waited for ever."""
    registry = ToolRegistry(url, WordEmbedder(), CONFIG)
    registry.register(WEATHER)
    done: list[str] = []

    def write_and_open() -> None:
        registry.register(WIRE)
        done.append("wrote")
        ToolRegistry(url, WordEmbedder(), CONFIG).close()
        done.append("opened")

    with psycopg.connect(stranger_url, autocommit=True) as stranger:
        for key in (0x746F6F6C_72616701, 0x746F6F6C_72616702):  # the fixed keys of the code before
            stranger.execute("SELECT pg_advisory_lock(%s)", (key,))
        worker = threading.Thread(target=write_and_open, daemon=True)
        worker.start()
        worker.join(60)
        held = worker.is_alive()
    worker.join(60)  # the stranger is gone: let a thread the old code held end before the registry closes
    assert not held and done == ["wrote", "opened"]
    registry.close()


def test_a_nul_in_a_request_costs_no_one_their_usage_records(url: str) -> None:
    """PostgreSQL text holds no NUL: one search of `"send invoice\\0"` failed the whole batch of the usage log, every
    tenant's records with it, while SQLite kept them."""
    registry = ToolRegistry(url, WordEmbedder(), CONFIG, monitor=MonitorConfig())
    registry.register(WIRE, WEATHER)
    acme = Principal(user="ana", tenant="acme")
    registry.search("weather forecast for a city", acme)
    registry.search("send invoice\x00", STRANGER)
    registry.search("wire money transfer", Principal(user="bo", tenant="evil\x00"))
    assert registry.usage is not None
    registry.usage.flush()
    kept = registry.store.usage.recent_requests(utc_now() - timedelta(hours=1))
    assert len(kept) == 3
    assert "send invoice\ufffd" in {row.request for row in kept}
    registry.close()


@pytest.mark.parametrize(
    ("location", "secret"),
    [
        ("postgresql://bob:S3cretPW%zz@/db?host={tmp}", "S3cretPW"),
        ("postgresql://bob@/db?host={tmp}&passwrd=Gen9xKsecret", "Gen9xKsecret"),
        ("postgresql://bob@/db?host={tmp}&password=Hunter%zz2", "Hunter"),
        # The second round: `urlsplit` ends the user part at `/`, `?` or `#`, where libpq reads on to the `@`.
        ("postgresql://bob:Ab3#kL9xQ@/db?host={tmp}", "kL9xQ"),
        ("postgresql://bob:Ab3?kL9xQ@/db?host={tmp}", "kL9xQ"),
        ("postgresql://bob:Ab3/kL9+zQ==@127.0.0.1:1/tools", "kL9+zQ"),
        ("postgresql://bob:Ab3/kL9+zQ==@127.0.0.1:1/tools", "Ab3"),
    ],
)
def test_a_malformed_connection_string_is_named_without_its_password(
    tmp_path: Path, location: str, secret: str
) -> None:
    """libpq echoes the token it could not read, and that token was a password (`%` in a generated one), or a
    mistyped `passwrd=` kept its value in the URL shown."""
    with pytest.raises(StoreError) as caught:
        open_store(location.format(tmp=tmp_path))
    assert secret not in str(caught.value)


def test_a_reason_never_repeats_a_secret_of_its_url() -> None:
    url = "postgresql://bob:p%40ss%zz@/db?host=/x&sslpassword=k3y"
    error = ValueError('invalid percent-encoded token: "p%40ss%zz", sslpassword "k3y", p@ss%zz')
    said = failure_reason(error, url)
    assert "p%40ss" not in said and "k3y" not in said and "p@ss" not in said
    assert "k3y" not in redacted_url(url) and "p%40ss" not in redacted_url(url)


@pytest.mark.parametrize(
    "location",
    [
        "host=/nonexistent user=bob password=S3cretPW dbname=tools",
        "dbname = tools host=/x",
        # The second round: libpq's escapes, a space in an unquoted value and a newline in a quoted one.
        "host=/nonexistent dbname=tools user=app password=Ab3\\ S3cretPW",
        "host=/nonexistent dbname=tools password='Ab3\\\nS3cretPW'",
        "host=/nonexistent dbname=tools password='S3cretPW",  # a quote never closed: unreadable, refused
    ],
)
def test_a_key_value_connection_string_is_postgresql_not_a_file_named_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, location: str
) -> None:
    """libpq's `key=value` form was opened as a SQLite file of that name, password included, and each process got
    a registry of its own."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=r"PostgreSQL|connection string") as caught:
        open_store(location)
    assert "S3cretPW" not in str(caught.value) and "S3cretPW" not in redacted_url(location)
    assert list(tmp_path.iterdir()) == []


def test_a_notification_the_server_cannot_queue_fails_no_write(
    url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The second round: the notification queue is the server's, shared with every role. A stranger who holds it
    full (a LISTEN in an open transaction, then large payloads) failed every write, whose notification was sent
    inside its transaction. It is sent after the commit, at best, and listeners read the generation every second."""
    writer = ToolRegistry(url, WordEmbedder(), CONFIG)
    server = ToolRegistry(url, WordEmbedder(), CONFIG)
    writer.register(WIRE, WEATHER)
    assert "wire_money" in _found(server, STRANGER)
    real = psycopg.Connection.execute

    def queue_full(self: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        if "pg_notify" in str(query):
            raise psycopg.errors.ProgramLimitExceeded("too many notifications in the NOTIFY queue")
        return real(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", queue_full)
    with caplog.at_level(logging.WARNING, "toolrag.store"):
        writer.register({**WIRE, "tenants": ["acme"]})
    assert "within a second" in caplog.text
    assert _eventually(lambda: "wire_money" not in _found(server, STRANGER))
    writer.close()
    server.close()


def test_a_nul_in_an_audited_name_is_written_not_raised(url: str) -> None:
    """An audit row names a caller's principal and the tool it asked for (a token's subject, a model's call): a NUL in
    either failed the write on PostgreSQL, and with it the change the row was written beside."""
    store = open_store(url)
    store.trail.append([AuditEntry("refused", "denied by rule", tool="tickets.delete_\x00", principal="oauth:\x00sub")])
    assert store._query("SELECT tool, principal FROM audit_log") == [  # type: ignore[attr-defined]
        ("tickets.delete_\ufffd", "oauth:\ufffdsub")
    ]
    store.close()


def test_doctor_reads_a_key_value_connection_string_as_postgresql_without_its_password(tmp_path: Path) -> None:
    """Doctor looked for a SQLite file named after the whole string, and showed it, password and all."""
    _, checks = doctor("--store", f"host={tmp_path} user=bob password=S3cretPW dbname=tools")
    check = registry_check(checks)
    assert check["status"] == "fail" and "cannot read the registry" in check["detail"]
    assert "S3cretPW" not in json.dumps(checks)


def test_a_url_with_no_host_part_keeps_its_slashes(postgres_url: str) -> None:
    """The second round, by the way: taking `schema=` out of `postgresql:///agents?host=/run/postgresql` (a local
    socket's usual URL) gave `postgresql:/agents?...`, which libpq does not read as a URL."""
    parts = urlsplit(postgres_url)
    user = parts.netloc.rsplit("@", 1)[0].split(":", 1)[0]
    url = f"postgresql://{parts.path}?{parts.query}&user={user}&schema=no_host_{uuid.uuid4().hex[:8]}"
    store = open_store(url)
    assert store.tools() == []
    store.close()


def test_a_proposal_for_a_parameter_named_with_a_nul_is_written(url: str) -> None:
    """The second round, unverified there: a schema may name a property with a NUL, and a model proposing a relation
    for it failed the whole run's write on PostgreSQL."""
    store = open_store(url)
    proposal = ProposedRelation("files.send", "files.read", "pa\x00th", "reads the path\x00", "a-model")
    store.relations.record_proposals([("files.send", "basis")], [proposal], [])
    rows = store._query("SELECT parameter, reason FROM proposed_relations")  # type: ignore[attr-defined]
    assert rows == [("pa\ufffdth", "reads the path\ufffd")]
    store.close()


@pytest.mark.parametrize(
    ("location", "secrets"),
    [
        # The third round: libpq's user part ends at the first `@` before any `/`, not the last `@` anywhere.
        ("postgresql://db.invalid/app?user=app&password=Zq7@pLm2&connect_timeout=1", ["Zq7@pLm2", "pLm2"]),
        ("postgresql://app:Zq7pLm2%zz@db.invalid/app?application_name=me@laptop", ["Zq7pLm2"]),
        # a `[` Python's URL parser refuses, which libpq reads as a host
        ("postgresql://app:Zq7pLm2x@[::1/app", ["Zq7pLm2x"]),
        ("postgresql://app:Zq7pLm2x@[db-primary.invalid]/app?connect_timeout=1", ["Zq7pLm2x"]),
        # a `/` in the password ends libpq's user part early: libpq reads its pieces as host and port
        ("postgresql://app:Zq7p%zz/Lm2x@db.invalid/app", ["Zq7p", "Lm2x"]),
        # Python's white space is Unicode, libpq's is ASCII: a no-break space is part of the password
        ("host=db.invalid user=app password=Ab\u00a0application_name=TAILofPW connect_timeout=1", ["TAILofPW"]),
    ],
)
def test_no_form_of_connection_string_shows_its_password(tmp_path: Path, location: str, secrets: list[str]) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(location)
    said = f"{caught.value} {redacted_url(location)}"
    _, checks = doctor("--store", location)
    assert "\n" not in str(caught.value)
    for secret in secrets:
        assert secret not in said and secret not in json.dumps(checks), secret


def test_toolrags_parameters_are_taken_out_and_every_other_byte_kept(postgres_url: str) -> None:
    """The third round: a URL's query was decoded and encoded again (a space came back as `+`, which libpq does not
    decode: `options=-c%20statement_timeout%3D5000` reached the server as `-c+statement_timeout=5000`), and an `@`
    in a parameter's value lost `schema=`."""
    schema = f"kept_{uuid.uuid4().hex[:8]}"
    url = f"{postgres_url}&options=-c%20statement_timeout%3D5000&application_name=me@laptop&{in_schema('', schema)[1:]}"
    store = open_store(url)
    assert store._query("SHOW statement_timeout") == [("5s",)]  # type: ignore[attr-defined]
    assert store._query("SELECT current_schema()") == [(schema,)]  # type: ignore[attr-defined]
    store.close()


@pytest.mark.parametrize(
    ("location", "is_postgres"),
    [
        ("region=eu/user=alice/tools.db", False),  # libpq knows no `region`: a file
        ("tools=v2,user=bob.db", False),
        ("./user=x.db", False),
        ("dbname=app", True),  # libpq reads one key too
        ("service=prod", True),
        ("password=abc\\ host=/x", True),
    ],
)
def test_a_file_and_a_key_value_string_are_told_apart_as_libpq_tells_them(location: str, is_postgres: bool) -> None:
    assert is_connection_string(location) is is_postgres


@pytest.mark.parametrize(
    ("location", "secret"),
    [
        # The fourth round: libpq tells a URL by its start alone, so a key=value value may hold `://`.
        ("host=db.invalid user=app password=Zq7://pLm2 dbname=app connect_timeout=1", "pLm2"),
        # schemes libpq does not read, which may still hold a password
        ("POSTGRESQL://app:Hunter2pw@db.invalid/app", "Hunter2pw"),
        ("postgresql+psycopg://app:Hunter2pw@db.invalid/app", "Hunter2pw"),
        # a harmless parameter left empty takes the next pair for its value, as libpq reads it
        ("host=db.invalid user= password=Hunter2pw dbname=app connect_timeout=1", "Hunter2pw"),
        ("host=db.invalid schema= password=Hunter2pw dbname=app", "Hunter2pw"),
        ("host=db.invalid vector_index= password=Hunter2pw dbname=app", "Hunter2pw"),
        # a stray quote: libpq's message repeats the string from it on
        ('postgresql://app:Hunt"er2pw%zz@db.invalid/app', "er2pw"),
        ('host=db.invalid password=Hun ter"2pw', "2pw"),
        # a password in `options`, which the server repeats when it refuses the setting
        ("host=db.invalid options='-c statement_timeout=Hunter2pw' connect_timeout=1", "Hunter2pw"),
        # a password with `/`, then `?` and a parameter toolrag knows, before the `@`
        ("postgresql://app:pw/Hunter2?schema=x@db.invalid/app", "Hunter2"),
        # text no encoder writes (a path or string from a non-UTF-8 environment)
        ("host=db.invalid password=Hunter2pw\udce9", "Hunter2pw"),
    ],
)
def test_no_spelling_of_a_location_shows_its_password(location: str, secret: str) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(location)
    _, checks = doctor("--store", location)
    said = f"{caught.value} {redacted_url(location)} {json.dumps(checks)}"
    assert "\n" not in str(caught.value) and secret not in said


def test_an_escaped_space_ending_a_value_is_kept_when_schema_is_taken_out() -> None:
    """The fourth round: `password=abc\\  schema=x dbname=d` lost the escaped space, so libpq read the password as
    `abc dbname=d` and no database."""
    plain, found = split_parameters("host=h password=abc\\  schema=x dbname=d")
    assert parsed(plain) == {"host": "h", "password": "abc ", "dbname": "d"} and found == {"schema": "x"}


def test_uppercase_keys_are_refused_not_made_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="cannot be read"):
        open_store("HOST=db dbname=app password=Hunter2pw")
    assert list(tmp_path.iterdir()) == []


def test_a_server_repeating_a_piece_of_a_hidden_value_is_not_repeated() -> None:
    """The fourth round: a password put in `options` came back in the server's refusal of the setting."""
    location = "host=db options='-c statement_timeout=Hunter2pw'"
    refused = Exception('FATAL: invalid value for parameter "statement_timeout": "Hunter2pw"')
    assert "Hunter2pw" not in failure_reason(refused, location)


@pytest.mark.parametrize(
    ("location", "secret"),
    [
        # The fifth round: an `@` the password holds ends libpq's user part; the rest was shown as the host.
        ("postgresql://app:p@ssW0rdXYZ@db.invalid/app?connect_timeout=1", "ssW0rdXYZ"),
        ("postgresql://app:Kx9@Lq2:Zw@db.invalid/app", "Lq2"),
        ("postgresql://app:s3cr/et?application_name=t0psecret@db/x", "t0psecret"),
        # The sixth round: a `/` then `?` in a password leaves no user part, and its tail reached the query.
        ("postgresql://app:1234/x?application_name=Zq9@db.invalid/db&connect_timeout=1", "Zq9"),
        ("postgresql://app:5432/Pw7?host=127.0.0.1&application_name=Zq9@db.example/app", "Zq9"),
        # a port of digits no ASCII reader takes for one
        ("postgresql://app:S3cretPW@db.invalid:\u00b2/db", "S3cretPW"),
    ],
)
def test_a_password_libpq_would_read_as_a_host_or_query_is_refused_unshown(location: str, secret: str) -> None:
    with pytest.raises(StoreError, match="%40") as caught:
        open_store(location)
    _, checks = doctor("--store", location)
    assert secret not in f"{caught.value} {redacted_url(location)} {json.dumps(checks)}"


def test_a_working_url_whose_password_holds_an_at_sign_is_refused_with_the_fix(postgres_url: str) -> None:
    """libpq opened it (a `host=` in the query overrode the misread host), and `repr(store)` showed the password's
    tail: the operator is told to write `%40`, which opens it."""
    parts = urlsplit(postgres_url)
    with pytest.raises(StoreError, match="%40"):
        open_store(urlunsplit(parts._replace(netloc=parts.netloc.replace(":@", ":pw@Kx9Lq2Zw@", 1))))


@pytest.mark.parametrize(
    "location",
    ["postgresql://app:@db.invalid/app?connect_timeout=1", "host=db.invalid user=app password='' connect_timeout=1"],
)
def test_an_empty_password_leaves_messages_readable(location: str) -> None:
    """The fifth round: the empty password was a secret, and replacing "" put a mark between every letter."""
    with pytest.raises(StoreError) as caught:
        open_store(location)
    assert "<hidden>f" not in str(caught.value) and "cannot connect to PostgreSQL" in str(caught.value)


def test_a_reason_is_read_as_far_as_its_bound() -> None:
    """The fifth round: each of a location's secrets was looked for in the whole message (16,000 secrets, a message
    of 110,000 characters: 2.2 s)."""
    location = "host=h password=" + "=".join(f"p{i:04}" for i in range(16_000))
    assert len(failure_reason(Exception("x" * 110_000), location)) <= MAX_REASON_CHARS


@pytest.mark.parametrize(
    "location",
    ["host=db.invalid connect_timeout=1\x00 sslmode=verify-full", "postgresql://h/d\x00b?sslmode=verify-full"],
)
def test_a_nul_in_a_connection_string_is_refused(location: str) -> None:
    """The sixth round: libpq reads a C string, so it connected without what followed a NUL (`sslmode=verify-full`),
    while messages showed it."""
    with pytest.raises(StoreError, match="a NUL"):
        open_store(location)
    assert "verify-full" not in redacted_url(location)
