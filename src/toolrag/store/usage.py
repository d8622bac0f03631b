"""The usage log in the store: retrievals with their chosen tools, and tool calls; aggregated in SQL.

The SQL is written once in the subset SQLite and PostgreSQL share (store/dialect.py rewrites `?` placeholders for
psycopg); each store supplies how to run a query and a transaction through `UsageTables`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import pairwise
from typing import Any, Literal

from toolrag.limits import MAX_REQUEST_CHARS
from toolrag.model import MAX_EXAMPLE_CHARS, Principal, utc_now
from toolrag.store.dialect import Dialect


def principal_label(user: str | None, tenant: str | None) -> str | None:
    """How the log names a principal: `user@tenant`, or the user of no tenant."""
    if user is None and tenant is None:
        return None
    return f"{user or '-'}@{tenant}" if tenant else user


@dataclass(frozen=True)
class Audience:
    """Whose records a reader may see: every tenant's (operators), one tenant's, or, for a caller of no tenant, only
    that caller's own (callers without a tenant share no tenant: an operator's own requests have none either), told
    apart by identity (`Principal.caller`), never by the label the log shows."""

    tenant: str | None = None
    caller: str | None = None
    everyone: bool = False

    @classmethod
    def operators(cls) -> Audience:
        return cls(everyone=True)

    @classmethod
    def of(cls, principal: Principal) -> Audience:
        return cls(principal.tenant, principal.caller)

    def condition(self, table: str = "") -> tuple[str, tuple[object, ...]]:
        """An SQL condition (starting with AND) limiting rows of `table` (an alias, or none) to this audience, and its
        parameters."""
        prefix = f"{table}." if table else ""
        if self.everyone:
            return "", ()
        if self.tenant is None:
            return f" AND {prefix}tenant IS NULL AND {prefix}caller = ?", (self.caller or "",)
        return f" AND {prefix}tenant = ?", (self.tenant,)


EVERYONE = Audience.operators()

# A retrieval `r` and a call `c` of one caller (NULL-safe in both databases: a principal may have no tenant, and
# records written before callers were logged have no caller).
_SAME_PRINCIPAL = (
    "COALESCE(r.tenant, '') = COALESCE(c.tenant, '') AND COALESCE(r.principal, '') = COALESCE(c.principal, '')"
    " AND COALESCE(r.caller, '') = COALESCE(c.caller, '')"
)


def _learner(table: str = "") -> str:
    """Whose window a row of the usage log counts in (the PARTITION BY of learning's queries): its tenant, or its
    caller when it has none (search/learned.py `learner_key`). A window shared by all let one tenant's flood of calls
    push every other tenant's history out of what is learned from usage."""
    t = f"{table}." if table else ""
    return f"COALESCE({t}tenant, ''), CASE WHEN COALESCE({t}tenant, '') = '' THEN {t}caller END"


# What one learning read holds at most, over all learners, as a multiple of its limit per learner: many learners (each
# caller of no tenant is one) must not make it as large as the log. Rows are taken by their rank within their learner
# first (`FAIRLY`): every learner's latest before anyone's second, so two flooding identities crowd no one out.
ALL_LEARNERS = 2
FAIRLY = "ORDER BY n, at DESC, id DESC LIMIT ?"


# Tools (or rows) one query names (`AND tool IN (...)`): far below either database's parameter limit (SQLite 32,766,
# psycopg 65,535), whatever the number of tools a reader may use.
TOOLS_PER_QUERY = 500

SampleKind = Literal["no_tool", "reformulated", "unshortlisted_call", "repeated_search"]
SAMPLE_KINDS: tuple[SampleKind, ...] = ("no_tool", "reformulated", "unshortlisted_call", "repeated_search")


@dataclass(frozen=True)
class RetrievalRecord:
    """One search: who asked what, and which tools came back with which scores."""

    request_hash: str
    results: tuple[tuple[str, float, float], ...]  # (tool, probability of relevance, dense cosine), best first
    request: str | None = None
    session: str | None = None
    principal: str | None = None
    step: str | None = None
    tenant: str | None = None
    strategy: str = "retrieval"  # or "all": the whole catalog fit the token budget
    at: datetime = field(default_factory=utc_now)
    caller: str | None = None  # `Principal.caller`


@dataclass(frozen=True)
class LoggedRequest:
    """A logged request as the console replays it: its text, whose it was, and the tools it got then."""

    id: int
    at: datetime
    request: str
    tenant: str | None
    principal: str | None
    tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class CallRecord:
    tool: str
    outcome: str
    latency_ms: float
    injected: bool
    session: str | None = None
    principal: str | None = None
    tenant: str | None = None
    at: datetime = field(default_factory=utc_now)
    caller: str | None = None  # `Principal.caller`
    origin: str | None = None  # None: an agent's call; "console": an admin's trial (events.CALL_ORIGIN)


@dataclass(frozen=True)
class TimedCall:
    """One call of a tool as its latency figures read it."""

    at: datetime
    outcome: str
    latency_ms: float
    origin: str | None


@dataclass(frozen=True)
class MissedRequest:
    """A request whose shortlist lacked the tool its caller then called successfully in the same session."""

    tool: str
    request: str
    tenant: str | None
    caller: str | None  # None: logged before callers were
    session: str


@dataclass(frozen=True)
class UsedRequest:
    """A request after which a tool was called successfully, in the same session of the same caller."""

    tenant: str | None
    caller: str | None  # None: logged before callers were
    tool: str
    request: str


@dataclass(frozen=True)
class TaskCall:
    """A successful call of an agent's session, with the first request logged in that session by the same caller:
    the task the session was for (search/examples.py `past_tasks`)."""

    session: str
    tenant: str | None
    caller: str | None
    tool: str
    request: str


@dataclass(frozen=True)
class SessionCall:
    """A successful call, as learning relations from usage reads it (search/learned.py)."""

    session: str
    tenant: str | None
    caller: str | None
    tool: str


@dataclass(frozen=True)
class ToolUsage:
    """One tool over a time window."""

    tool: str
    injected: int
    called: int
    mean_score: float | None  # relevance: the mean request-tool cosine when it was chosen
    min_score: float | None
    last_injected: datetime | None
    last_called: datetime | None

    @property
    def call_rate(self) -> float:
        return self.called / self.injected if self.injected else 0.0


@dataclass(frozen=True)
class RequestSample:
    """A request behind a retrieval miss, to enrich descriptions with the words users actually use."""

    kind: SampleKind
    at: datetime
    request: str | None
    session: str | None
    detail: str


@dataclass(frozen=True)
class UsageTotals:
    retrievals: int
    no_tool: int
    calls: int  # calls that ran: refusals and calls of unknown tools are `refused_calls`
    failed_calls: int
    sessions: int
    reformulated: int = 0  # searches whose tools only a second-chance step (search/reformulate.py) found
    whole_catalog: int = 0  # searches answered with the principal's whole catalog (the `all` strategy)
    refused_calls: int = 0  # calls refused before they ran (permissions, a limit, a tool that does not exist)


Rows = list[tuple[Any, ...]]


class UsageTables:
    """Usage SQL over one store's connection: `query(sql, params)` reads, `transaction()` yields a cursor-like
    object with `execute(sql, params)` whose writes commit together."""

    def __init__(
        self,
        query: Callable[[str, Sequence[object]], Rows],
        transaction: Callable[[], AbstractContextManager[Any]],
        dialect: Dialect,
    ) -> None:
        self._query = query
        self._transaction = transaction
        self._timestamp = dialect.timestamp
        self._parse_time = dialect.parse_time
        self._day = dialect.day
        self._sql = dialect.sql

    def record(self, retrievals: Sequence[RetrievalRecord], calls: Sequence[CallRecord]) -> None:
        with self._transaction() as db:
            for retrieval in retrievals:
                row = db.execute(
                    self._sql(
                        "INSERT INTO retrievals(at, session, principal, tenant, request, request_hash, chosen, step,"
                        " strategy, caller) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
                    ),
                    (
                        self._timestamp(retrieval.at),
                        retrieval.session,
                        retrieval.principal,
                        retrieval.tenant,
                        retrieval.request,
                        retrieval.request_hash,
                        len(retrieval.results),
                        retrieval.step,
                        retrieval.strategy,
                        retrieval.caller,
                    ),
                ).fetchone()
                for rank, (tool, score, dense) in enumerate(retrieval.results, start=1):
                    db.execute(
                        self._sql(
                            "INSERT INTO retrieval_results(retrieval_id, tool, rank, score, dense)"
                            " VALUES (?, ?, ?, ?, ?)"
                        ),
                        (row[0], tool, rank, score, dense),
                    )
            for call in calls:
                db.execute(
                    self._sql(
                        "INSERT INTO calls(at, session, principal, tenant, tool, outcome, latency_ms, injected, caller,"
                        " origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    ),
                    (
                        self._timestamp(call.at),
                        call.session,
                        call.principal,
                        call.tenant,
                        call.tool,
                        call.outcome,
                        call.latency_ms,
                        call.injected,
                        call.caller,
                        call.origin,
                    ),
                )

    def tool_usage(self, since: datetime, audience: Audience = EVERYONE) -> list[ToolUsage]:
        start = self._timestamp(since)
        mine, tenant = audience.condition("r")
        injected = self._query(
            self._sql(
                "SELECT rr.tool, COUNT(*), AVG(rr.dense), MIN(rr.dense), MAX(r.at) FROM retrieval_results rr"
                f" JOIN retrievals r ON r.id = rr.retrieval_id WHERE r.at >= ?{mine} GROUP BY rr.tool"
            ),
            (start, *tenant),
        )
        mine, tenant = audience.condition()
        called = self._query(
            # An admin's trials in the console are not agents' calls: they would lift a never-offered tool's call rate.
            # Nor is a call refused before it ran (permissions, limits, a name no tool has): the totals count those.
            self._sql(
                "SELECT tool, COUNT(*), MAX(at) FROM calls WHERE at >= ? AND origin IS NULL"
                f" AND outcome NOT IN ('refused', 'unknown_tool'){mine} GROUP BY tool"
            ),
            (start, *tenant),
        )
        calls = {row[0]: (int(row[1]), self._parse_time(row[2])) for row in called}
        usage = []
        for tool, count, mean, minimum, last in injected:
            made, last_call = calls.pop(tool, (0, None))
            usage.append(
                ToolUsage(tool, int(count), made, float(mean), float(minimum), self._parse_time(last), last_call)
            )
        usage.extend(ToolUsage(tool, 0, made, None, None, None, last) for tool, (made, last) in calls.items())
        return sorted(usage, key=lambda u: u.tool)

    def totals(
        self, since: datetime, audience: Audience = EVERYONE, tools: Collection[str] | None = None
    ) -> UsageTotals:
        """Searches of `audience`, and its calls: those that ran, of `tools` only (None: any tool); those refused or
        of no tool, all (answered alike whether the tool is hidden or absent, they name no tool a reader sees)."""
        start = self._timestamp(since)
        mine, tenant = audience.condition()
        retrievals = self._query(
            self._sql(
                "SELECT COUNT(*), SUM(CASE WHEN chosen = 0 THEN 1 ELSE 0 END), COUNT(DISTINCT session),"
                " SUM(CASE WHEN step IS NULL THEN 0 ELSE 1 END), SUM(CASE WHEN strategy = 'all' THEN 1 ELSE 0 END)"
                f" FROM retrievals WHERE at >= ?{mine}"
            ),
            (start, *tenant),
        )[0]
        ran, failed = 0, 0
        for only, names in _tool_clauses(tools, "tool"):
            counted = self._query(
                self._sql(
                    "SELECT COUNT(*), SUM(CASE WHEN outcome = 'ok' THEN 0 ELSE 1 END)"
                    f" FROM calls WHERE at >= ?{mine} AND outcome NOT IN {_REFUSED}{only}"
                ),
                (start, *tenant, *names),
            )[0]
            ran, failed = ran + int(counted[0] or 0), failed + int(counted[1] or 0)
        (refused,) = self._query(
            self._sql(f"SELECT COUNT(*) FROM calls WHERE at >= ?{mine} AND outcome IN {_REFUSED}"), (start, *tenant)
        )[0]
        return UsageTotals(
            int(retrievals[0]),
            int(retrievals[1] or 0),
            ran,
            failed,
            int(retrievals[2]),
            int(retrievals[3] or 0),
            int(retrievals[4] or 0),
            int(refused or 0),
        )

    def samples(
        self,
        kind: SampleKind,
        since: datetime,
        limit: int = 50,
        audience: Audience = EVERYONE,
        tools: Collection[str] | None = None,
    ) -> list[RequestSample]:
        """The latest samples of `kind`; of unshortlisted calls, only calls of `tools` (None: any tool), chosen in the
        query so that calls of other tools do not crowd them out (the other kinds name no tool)."""
        start = self._timestamp(since)
        mine, tenant = audience.condition()
        if kind == "no_tool":
            rows = self._query(
                self._sql(
                    f"SELECT at, request, session, '' FROM retrievals WHERE at >= ? AND chosen = 0{mine}"
                    " ORDER BY at DESC LIMIT ?"
                ),
                (start, *tenant, limit),
            )
        elif kind == "reformulated":
            rows = self._query(
                self._sql(
                    f"SELECT at, request, session, step FROM retrievals WHERE at >= ? AND step IS NOT NULL{mine}"
                    " ORDER BY at DESC LIMIT ?"
                ),
                (start, *tenant, limit),
            )
        elif kind == "unshortlisted_call":
            # The call, and the latest request of its session before it: the words that should have found the tool.
            call_is_mine, call_tenant = audience.condition("c")
            request_is_mine, request_tenant = audience.condition("r")
            rows = []
            for only, names in _tool_clauses(tools, "c.tool"):
                rows += self._query(
                    self._sql(
                        "SELECT c.at, (SELECT r.request FROM retrievals r WHERE r.session = c.session AND r.at <= c.at"
                        f"{request_is_mine} ORDER BY r.at DESC LIMIT 1), c.session, c.tool FROM calls c"
                        " WHERE c.at >= ? AND NOT c.injected AND c.outcome = 'ok' AND c.origin IS NULL"
                        f"{call_is_mine}{only}"
                        " ORDER BY c.at DESC LIMIT ?"
                    ),
                    (*request_tenant, start, *call_tenant, *names, limit),
                )
            rows = _newest(rows, 0, limit)
        else:
            rows = self._query(
                self._sql(
                    f"SELECT r.at, r.request, r.session, '' FROM retrievals r WHERE r.at >= ?{mine} AND r.session IN"
                    " (SELECT session FROM retrievals WHERE at >= ? AND session IS NOT NULL GROUP BY session"
                    " HAVING COUNT(*) > 1) ORDER BY r.session, r.at LIMIT ?"
                ),
                (start, *tenant, start, limit),
            )
        return [
            RequestSample(kind, self._parse_time(at), text, session, str(extra)) for at, text, session, extra in rows
        ]

    def called_after(self, since: datetime, limit: int = 50_000) -> list[UsedRequest]:
        """Each learner's latest `limit` successful calls since `since` (`_learner`), each with the latest request
        before it in the same session of the same caller, since `since` too: what users asked when a tool turned out
        to be the one they needed. Newest first; without the calls whose request is longer than a request may be
        (logged in full).

        The sessions' latest `limit` requests are read once and each call finds the one before it by bisection: a
        long session costs its length, not its calls times its requests, and memory stays bounded."""
        agents = "at >= ? AND outcome = 'ok' AND session IS NOT NULL"
        start = self._timestamp(since)
        latest = f"ROW_NUMBER() OVER (PARTITION BY {_learner()} ORDER BY at DESC, id DESC) AS n"
        calls = self._query(
            self._sql(
                "SELECT at, id, session, tenant, principal, caller, tool FROM (SELECT at, id, session, tenant,"
                f" principal, caller, tool, {latest} FROM calls WHERE {agents}) latest WHERE n <= ? {FAIRLY}"
            ),
            (start, limit, ALL_LEARNERS * limit),
        )
        asked = self._query(
            self._sql(
                "SELECT at, id, session, tenant, principal, caller FROM (SELECT at, id, session, tenant, principal,"
                f" caller, {latest} FROM retrievals WHERE request IS NOT NULL AND at >= ?"
                f" AND session IN (SELECT session FROM calls WHERE {agents})) latest WHERE n <= ? {FAIRLY}"
            ),
            (start, start, limit, ALL_LEARNERS * limit),
        )
        # Newest first again (each row starts with its time and id), as the search for each call's request needs.
        calls, asked = (sorted(rows, key=lambda row: (row[0], row[1]), reverse=True) for rows in (calls, asked))
        requests: dict[tuple[str, ...], tuple[list[Any], list[int]]] = {}
        for at, row_id, *who in reversed(asked):
            times, ids = requests.setdefault(_session_of(*who), ([], []))
            times.append(at)
            ids.append(int(row_id))
        pairs = []
        for at, _, session, tenant, principal, caller, tool in calls:
            times, ids = requests.get(_session_of(session, tenant, principal, caller), ([], []))
            if before := bisect_right(times, at):
                pairs.append((_text(tenant), _text(caller), str(tool), ids[before - 1]))
        texts = self._request_texts({row_id for *_, row_id in pairs})
        return [
            UsedRequest(tenant, caller, tool, texts[row_id])
            for tenant, caller, tool, row_id in pairs
            if row_id in texts
        ]

    def session_calls(self, since: datetime, limit: int) -> list[SessionCall]:
        """Each learner's latest `limit` successful calls agents made in a session since `since`, oldest first (in
        the order they were made): the window learning relations from usage reads, bounded per learner whatever the
        log holds. A learner is a tenant, or a caller of no tenant (search/learned.py `learner_key`): a window
        shared by all would let one tenant's flood of calls push another's history out. An admin's console trials
        are not agents' sessions."""
        rows = self._query(
            self._sql(
                "SELECT session, tenant, caller, tool FROM (SELECT session, tenant, caller, tool, at, id,"
                f" ROW_NUMBER() OVER (PARTITION BY {_learner()} ORDER BY at DESC, id DESC) AS n FROM calls"
                " WHERE at >= ? AND outcome = 'ok' AND session IS NOT NULL AND origin IS NULL) latest"
                " WHERE n <= ? ORDER BY at, id"
            ),
            (self._timestamp(since), limit),
        )
        return [SessionCall(str(s), _text(tenant), _text(caller), str(tool)) for s, tenant, caller, tool in rows]

    def task_calls(self, since: datetime, limit: int = 50_000, max_chars: int = MAX_EXAMPLE_CHARS) -> list[TaskCall]:
        """Each learner's latest `limit` successful calls agents made in a session since `since` (`_learner`) after
        that caller's first request of the session, each with that request, oldest first; without the sessions
        whose first request is longer than `max_chars` (a document, not a task). An admin's console trials are not
        agents' sessions.

        A session's first request is found once, not once a call, and its text read once: the calls of one session
        share one string."""
        agents = "c.at >= ? AND c.outcome = 'ok' AND c.session IS NOT NULL AND c.origin IS NULL"
        columns = ("tenant", "principal", "caller")
        who = ", ".join(f"COALESCE(r.{column}, '')" for column in columns)
        keys = ", ".join(f"COALESCE(r.{column}, '') AS {column}_key" for column in columns)
        same = " AND ".join(f"f.{column}_key = COALESCE(c.{column}, '')" for column in columns)
        # The first request of each caller's session: the earliest (by time, then id: ids of several writers need not
        # follow time).
        first = (
            f"SELECT r.session AS session, {keys}, r.id AS first_id, r.at AS first_at, ROW_NUMBER() OVER"
            f" (PARTITION BY r.session, {who} ORDER BY r.at, r.id) AS n FROM retrievals r"
            f" WHERE r.request IS NOT NULL AND r.session IN (SELECT c.session FROM calls c WHERE {agents})"
        )
        latest = f"ROW_NUMBER() OVER (PARTITION BY {_learner('c')} ORDER BY c.at DESC, c.id DESC) AS latest_n"
        rows = self._query(
            self._sql(
                # CROSS JOIN: SQLite keeps `calls` the outer loop and indexes the first requests (joined as written,
                # it scanned them and searched the calls for each: quadratic in the log, holding the store's lock).
                "SELECT session, tenant, caller, tool, first_id, at, id FROM (SELECT c.session AS session,"
                " c.tenant AS tenant,"
                f" c.caller AS caller, c.tool AS tool, f.first_id AS first_id, c.at AS at, c.id AS id, {latest}"
                f" FROM calls c CROSS JOIN ({first}) f WHERE f.n = 1 AND f.session = c.session AND {same}"
                f" AND f.first_at <= c.at AND {agents}) latest WHERE latest_n <= ?"
                " ORDER BY latest_n, at DESC, id DESC LIMIT ?"
            ),
            (self._timestamp(since), self._timestamp(since), limit, ALL_LEARNERS * limit),
        )
        requests = self._request_texts({int(row[4]) for row in rows}, max_chars)
        return [
            TaskCall(str(session), _text(tenant), _text(caller), str(tool), requests[int(first)])
            for session, tenant, caller, tool, first, *_ in sorted(rows, key=lambda row: (row[5], row[6]))
            if int(first) in requests
        ]

    def _request_texts(self, ids: Collection[int], max_chars: int = MAX_REQUEST_CHARS) -> dict[int, str]:
        """The texts of the retrievals `ids` that are at most `max_chars` long."""
        found: dict[int, str] = {}
        ordered = sorted(ids)
        for at in range(0, len(ordered), TOOLS_PER_QUERY):
            chunk = ordered[at : at + TOOLS_PER_QUERY]
            marks = ", ".join("?" for _ in chunk)
            rows = self._query(
                self._sql(f"SELECT id, request FROM retrievals WHERE id IN ({marks}) AND LENGTH(request) <= ?"),
                (*chunk, max_chars),
            )
            found.update((int(row_id), str(request)) for row_id, request in rows)
        return found

    def recent_requests(
        self, since: datetime, limit: int = 100, audience: Audience = EVERYONE, tool: str | None = None
    ) -> list[LoggedRequest]:
        """The latest distinct requests (by text and tenant) with the tools each got, newest first; with `tool`,
        only requests it was offered for. Requests logged without their text are left out."""
        mine, tenant = audience.condition("r")
        offered = " AND EXISTS (SELECT 1 FROM retrieval_results o WHERE o.retrieval_id = r.id AND o.tool = ?)"
        rows = self._query(
            self._sql(
                "SELECT r.id, r.at, r.request, r.tenant, r.principal FROM retrievals r WHERE r.at >= ?"
                f" AND r.request IS NOT NULL{mine}{offered if tool else ''} ORDER BY r.at DESC LIMIT ?"
            ),
            (self._timestamp(since), *tenant, *((tool,) if tool else ()), limit * 4),
        )
        latest: dict[tuple[str, str | None], LoggedRequest] = {}
        for row_id, at, request, row_tenant, principal in rows:
            key = (str(request), None if row_tenant is None else str(row_tenant))
            if key not in latest and len(latest) < limit:
                latest[key] = LoggedRequest(int(row_id), self._parse_time(at), *key, principal and str(principal))
        tools = self._chosen_tools([entry.id for entry in latest.values()])
        return [replace(entry, tools=tuple(tools.get(entry.id, ()))) for entry in latest.values()]

    def _chosen_tools(self, ids: Sequence[int]) -> dict[int, list[str]]:
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        rows = self._query(
            self._sql(
                f"SELECT retrieval_id, tool FROM retrieval_results WHERE retrieval_id IN ({marks}) ORDER BY rank"
            ),
            tuple(ids),
        )
        chosen: dict[int, list[str]] = {}
        for retrieval_id, tool in rows:
            chosen.setdefault(int(retrieval_id), []).append(str(tool))
        return chosen

    def calls(
        self,
        since: datetime,
        limit: int = 200,
        audience: Audience = EVERYONE,
        principal: str | None = None,
        tool: str | None = None,
        outcomes: Sequence[str] | None = None,
        tools: Collection[str] | None = None,
    ) -> list[CallRecord]:
        """Calls and refusals, newest first, filtered by principal, tool and outcome (the audit view; `outcomes`:
        any of these, None: any outcome) and to calls of `tools` (None: any tool; a reader's usable tools, chosen in
        the query so that calls of other tools do not crowd them out of the `limit`)."""
        if outcomes is not None and not outcomes:
            return []
        if tool and tools is not None:
            tools = [tool] if tool in tools else []
        mine, tenant = audience.condition()
        filters = [(" AND principal = ?", principal), (" AND tool = ?", tool)]
        chosen = [(clause, value) for clause, value in filters if value]
        clauses = "".join(clause for clause, _ in chosen)
        wanted = tuple(outcomes or ())
        if wanted:
            clauses += f" AND outcome IN ({', '.join('?' for _ in wanted)})"
        rows: Rows = []
        for only, names in _tool_clauses(tools, "tool"):
            rows += self._query(
                self._sql(
                    "SELECT tool, outcome, latency_ms, injected, session, principal, tenant, at, origin FROM calls"
                    f" WHERE at >= ?{mine}{clauses}{only} ORDER BY at DESC LIMIT ?"
                ),
                (self._timestamp(since), *tenant, *(value for _, value in chosen), *wanted, *names, limit),
            )
        return [
            CallRecord(str(t), str(o), float(ms), bool(inj), s, p, tn, self._parse_time(at), origin=_text(origin))
            for t, o, ms, inj, s, p, tn, at, origin in _newest(rows, 7, limit)
        ]

    def timed_calls(
        self, tool: str, since: datetime, audience: Audience = EVERYONE, limit: int = 50_000
    ) -> list[TimedCall]:
        """The latest `limit` calls of one tool since `since` that `audience` may read, oldest first: what its
        latency and error figures are computed from (percentiles in Python: the two databases share no function)."""
        mine, tenant = audience.condition()
        rows = self._query(
            self._sql(
                f"SELECT at, outcome, latency_ms, origin FROM calls WHERE tool = ? AND at >= ?{mine}"
                " ORDER BY at DESC LIMIT ?"
            ),
            (tool, self._timestamp(since), *tenant, limit),
        )
        return [
            TimedCall(self._parse_time(at), str(outcome), float(ms), _text(origin))
            for at, outcome, ms, origin in reversed(rows)
        ]

    def missed_requests(self, since: datetime, limit: int = 5000) -> list[MissedRequest]:
        """Every successful call with each request of its session, up to the call, whose shortlist did not contain
        the tool: the words users use for a tool that retrieval did not connect. A tool's calls in one session are
        read as its last (the requests before it are those before the others): a session of thousands of calls costs
        its requests, not their product. Each learner's (`_learner`) latest `limit` sessions and tools, and latest
        `limit` pairs; at most `ALL_LEARNERS` times `limit` in all, by rank within each learner first (one session of
        12,000 requests filled the whole bound)."""
        last = (
            "SELECT tool, tenant, principal, caller, session, MAX(at) AS at FROM calls WHERE at >= ? AND outcome = 'ok'"
            " AND session IS NOT NULL GROUP BY tool, tenant, principal, caller, session"
        )
        latest = f"ROW_NUMBER() OVER (PARTITION BY {_learner()} ORDER BY at DESC, session, tool) AS n"
        chosen = (
            f"SELECT tool, tenant, principal, caller, session, at, n FROM (SELECT tool, tenant, principal, caller,"
            f" session, at, {latest} FROM ({last}) l) numbered WHERE n <= ?"
        )
        pair = f"ROW_NUMBER() OVER (PARTITION BY {_learner('c')} ORDER BY c.n, r.at DESC, r.id DESC) AS pair_n"
        rows = self._query(
            self._sql(
                "SELECT tool, request, tenant, caller, session FROM (SELECT c.tool AS tool, r.request AS request,"
                f" c.tenant AS tenant, c.caller AS caller, c.session AS session, {pair} FROM ({chosen}) c"
                f" JOIN retrievals r ON r.session = c.session AND r.at <= c.at AND {_SAME_PRINCIPAL}"
                " WHERE r.request IS NOT NULL AND NOT EXISTS"
                " (SELECT 1 FROM retrieval_results rr WHERE rr.retrieval_id = r.id AND rr.tool = c.tool)) pairs"
                " WHERE pair_n <= ? ORDER BY pair_n LIMIT ?"
            ),
            (self._timestamp(since), limit, limit, ALL_LEARNERS * limit),
        )
        return [
            MissedRequest(str(tool), str(request), _text(tenant), _text(caller), str(session))
            for tool, request, tenant, caller, session in rows
        ]

    def requests_for_tool(
        self, tool: str, since: datetime, limit: int = 5, audience: Audience = EVERYONE
    ) -> list[tuple[str | None, float]]:
        """Recent requests the tool was offered for, with its relevance to each (what its description must serve)."""
        mine, tenant = audience.condition("r")
        rows = self._query(
            self._sql(
                "SELECT r.request, rr.dense FROM retrieval_results rr JOIN retrievals r ON r.id = rr.retrieval_id"
                f" WHERE rr.tool = ? AND r.at >= ?{mine} ORDER BY r.at DESC LIMIT ?"
            ),
            (tool, self._timestamp(since), *tenant, limit),
        )
        return [(request, float(dense)) for request, dense in rows]

    def score_histogram(self, since: datetime, buckets: int = 10, audience: Audience = EVERYONE) -> list[int]:
        """How many chosen tools had a relevance (request-tool cosine) in each of `buckets` ranges of [0, 1]."""
        # One SUM per range: casts and FLOOR round differently (or are missing) across the two databases.
        edges = [i / buckets for i in range(buckets)] + [2.0]
        ranges = ", ".join(
            f"SUM(CASE WHEN rr.dense >= {low!r} AND rr.dense < {high!r} THEN 1 ELSE 0 END)"
            for low, high in pairwise(edges)
        )
        mine, tenant = audience.condition("r")
        query = (
            f"SELECT {ranges} FROM retrieval_results rr JOIN retrievals r ON r.id = rr.retrieval_id"
            f" WHERE r.at >= ?{mine}"
        )
        row = self._query(self._sql(query), (self._timestamp(since), *tenant))[0]
        return [int(count or 0) for count in row]

    def daily(
        self, since: datetime, audience: Audience = EVERYONE, tools: Collection[str] | None = None
    ) -> list[tuple[str, int, int]]:
        """(day, retrievals, calls) per UTC day: searches of `audience`, and its calls as `totals` counts them."""
        start = self._timestamp(since)
        mine, tenant = audience.condition()
        per_day: dict[str, list[int]] = {}
        ran = [
            ("calls", 1, f" AND outcome NOT IN {_REFUSED}{only}", names) for only, names in _tool_clauses(tools, "tool")
        ]
        parts = [("retrievals", 0, "", ()), *ran, ("calls", 1, f" AND outcome IN {_REFUSED}", ())]
        for table, slot, only, names in parts:
            query = f"SELECT {self._day}, COUNT(*) FROM {table} WHERE at >= ?{mine}{only} GROUP BY 1"
            for day, count in self._query(self._sql(query), (start, *tenant, *names)):
                per_day.setdefault(str(day), [0, 0])[slot] += int(count)
        return [(day, counts[0], counts[1]) for day, counts in sorted(per_day.items())]

    def trim_caller(self, caller: str, keep: int) -> int:
        """Delete a caller's searches beyond its latest `keep`, and its calls likewise (the size bound: retention
        bounds age only); returns rows deleted. Read along the (caller, at) index: a cost of the caller's own rows."""
        deleted = 0
        with self._transaction() as db:
            for table in ("retrievals", "calls"):
                deleted += db.execute(
                    self._sql(
                        f"DELETE FROM {table} WHERE caller = ? AND at < (SELECT at FROM {table} WHERE caller = ?"
                        " ORDER BY at DESC LIMIT 1 OFFSET ?)"
                    ),
                    (caller, caller, keep - 1),
                ).rowcount
        return deleted

    def prune(self, before: datetime) -> int:
        """Delete log entries older than `before` (the retention bound); returns rows deleted."""
        cutoff = self._timestamp(before)
        with self._transaction() as db:
            retrievals = db.execute(self._sql("DELETE FROM retrievals WHERE at < ?"), (cutoff,)).rowcount
            calls = db.execute(self._sql("DELETE FROM calls WHERE at < ?"), (cutoff,)).rowcount
        return int(retrievals) + int(calls)


_REFUSED = "('refused', 'unknown_tool')"  # calls that did not run: of a tool the caller may not use, or of none


def _tool_clauses(tools: Collection[str] | None, column: str) -> list[tuple[str, tuple[str, ...]]]:
    """Conditions (starting with AND) that together choose the rows of `tools` in `column`, each with its parameters:
    one query a condition (none for no tools; one choosing every row for None)."""
    if tools is None:
        return [("", ())]
    names = sorted(tools)
    chunks = [tuple(names[at : at + TOOLS_PER_QUERY]) for at in range(0, len(names), TOOLS_PER_QUERY)]
    return [(f" AND {column} IN ({', '.join('?' for _ in chunk)})", chunk) for chunk in chunks]


def _newest(rows: Rows, at: int, limit: int) -> list[Any]:
    """The `limit` newest of rows gathered by several queries, each newest first (`at`: the column of the time)."""
    return sorted(rows, key=lambda row: row[at], reverse=True)[:limit]


def _session_of(session: object, tenant: object, principal: object, caller: object) -> tuple[str, ...]:
    """One caller's session (NULL-safe, as `_SAME_PRINCIPAL`)."""
    return (str(session), *(str(value or "") for value in (tenant, principal, caller)))


def _text(value: object) -> str | None:
    return None if value is None else str(value)
