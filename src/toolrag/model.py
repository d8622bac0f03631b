"""The nouns of toolrag: tools, principals, capability cards and search results.

Pydantic models sit at the boundaries (anything a user or a file hands us is validated here); the search
internals work on plain arrays and dataclasses.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from toolrag.errors import InvalidToolError
from toolrag.schemas.drafts import MAX_DEPTH, deeper_than, validator_class
from toolrag.schemas.validation import UnsafeSchema, check_enums, check_safety

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_.-]{1,128}$")
_SEGMENT_BOUNDARY = re.compile(r"\.|__")
_NOT_TOLD_APART = re.compile(r"[^a-z0-9]+")
# A glob's tokens: a bracket expression (fnmatch's: `]` first in it is a member), a wildcard, a double underscore, a
# separator, any other character.
_GLOB_TOKEN = re.compile(r"\[!?\]?[^\]]*\]|\*|\?|__|[-_]|.", re.DOTALL)
MAX_SCHEMA_CHARS = 262_144  # of a schema as JSON: real ones stay under a tenth of it
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


MAX_DESCRIPTION_CHARS = 8192
MAX_EXAMPLE_CHARS = 1000  # an example request is a sentence or two, not a document
MAX_EXAMPLES = 200  # per tool, across tenants
# Who owns which field of a tool imported from a source (an MCP server): the source owns its text and schemas, which
# a sync rewrites; operators own everything else (tenants, scopes, aliases, examples, not-for, category, ...), which a
# sync keeps. An operator's edit of a source-owned field is an override a sync keeps too (`Tool.overrides`).
SOURCE_FIELDS = frozenset({"description", "input_schema", "output_schema", "annotations"})
# What a model reads of a tool, or is given or told to call because of it, which the registry's text review holds
# (catalog/review.py): its source's text; what operators write that is shown with it (the not-for line of every
# capability card, each tenant's description); the tools it brings along and tells the model to call first
# (`requires`); what retrieval matches it by (aliases, example requests and past tasks, the category its group
# and routes read), which decides which tools reach the model as much as a description does; and `return_direct`
# (its raw output becomes the user's answer, which the model never reads).
REVIEWED_FIELDS = frozenset(
    {*SOURCE_FIELDS, "not_for", "tenant_descriptions", "requires", "aliases", "examples", "category", "return_direct"}
)
# Whom a tool reaches (catalog/review.py): a write that narrows them goes live at once, one that widens them (a
# tenant added, a scope dropped) waits for review like a text change; so does reactivating a tool.
ACCESS_FIELDS = ("scopes", "tenants")
# What a new tool brings beyond its own text, which waits for review like an existing tool's (issue 48): views that
# let it win requests another tool's text answers.
NEW_TOOL_VIEWS = frozenset({"aliases", "examples"})
# Fields only a sync writes (mcp/importer.py) and a backup restores: which source-owned fields an operator replaced
# and the source's own values to return to. Written by anyone else, a "return to the source's value" would put any
# text live unreviewed.
SYNC_FIELDS = frozenset({"overrides", "source_values"})
# Among a held change's proposed values (catalog/review.py): a tool written inactive (new, or reactivated) becomes
# active when approved.
ACTIVATION = "active"


def reviewed_text_hash(text: dict[str, Any]) -> str:
    """The hash a held text change is known by: of its `REVIEWED_FIELDS` values as JSON."""
    return hashlib.sha256(json.dumps(text, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def fitted_to_tenants(base: Mapping[str, Any], pending: Mapping[str, Any]) -> dict[str, Any]:
    """`pending` (what waits for a tool, `base` as JSON) such that approving it makes a tool: the example requests
    and descriptions of tenants the approved tool would not serve (a narrowing made since, under review or not) are
    taken out with it."""
    approved = {**base, **pending}
    tenants = set(approved.get("tenants") or ())
    fitted = dict(pending)
    if not tenants:  # every tenant's: every view serves
        return fitted
    examples = approved.get("examples") or []
    serving = [example for example in examples if example.get("tenant") in (None, *tenants)]
    if serving != examples:
        fitted["examples"] = serving
    described = approved.get("tenant_descriptions") or {}
    if (kept := {tenant: text for tenant, text in described.items() if tenant in tenants}) != described:
        fitted["tenant_descriptions"] = kept
    return fitted


# In `Tool.overrides`: an operator deactivated the tool, and no sync reactivates it (the operator does).
DEACTIVATED_BY_OPERATOR = "active"
SYNCED_SOURCE_PREFIX = "mcp:"  # the source of tools a sync rewrites: `mcp:SERVER`


def utc_now() -> datetime:
    return datetime.now(UTC)


def check_tool_name(name: str) -> str:
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.fullmatch(name):
        raise InvalidToolError(
            f"invalid tool name {name!r}: use 1-128 characters from letters, digits, '_', '.' and '-' "
            "(namespaces look like 'github.create_issue')"
        )
    return name


def check_description(text: str, what: str = "description") -> str:
    """A description as stored: stripped, not blank, at most MAX_DESCRIPTION_CHARS."""
    text = text.strip() if isinstance(text, str) else ""
    if not text:
        raise InvalidToolError(f"{what} must not be blank")
    if len(text) > MAX_DESCRIPTION_CHARS:
        raise InvalidToolError(f"{what} is {len(text):,} characters (at most {MAX_DESCRIPTION_CHARS:,})")
    return text


MAX_GROUP_NAME_CHARS = 128  # as a tool's name: a group is a category or a name's namespace
MAX_GROUP_DESCRIPTION_CHARS = 2000  # a paragraph: what a group is for, read by a model and embedded once


def group_description_problem(name: object, text: object) -> str | None:
    """What is wrong with a group's description to write (None: removing it), if anything."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_GROUP_NAME_CHARS:
        return f"a group's name is 1-{MAX_GROUP_NAME_CHARS} characters, not {str(name)[:40]!r}"
    if any(ord(character) < 32 for character in name):
        return f"the group name {name[:40]!r} holds control characters"
    if text is None:
        return None  # removing a description, or a rejection remembered: whatever name it was written under
    if {".", ".."} & set(name.split("/")):
        # A page addressing it (the console's decisions) would be another page's: browsers resolve such segments.
        return f"the group name {name[:40]!r} holds a '.' or '..' between slashes"
    if not isinstance(text, str) or not text.strip():
        return f"group {name!r}: the description is blank (use None to remove it)"
    if len(text) > MAX_GROUP_DESCRIPTION_CHARS:
        return f"group {name!r}: the description is {len(text):,} characters (at most {MAX_GROUP_DESCRIPTION_CHARS:,})"
    return None


def check_tenant_name(tenant: str) -> str:
    """A tenant's name as a key of `Tool.tenant_descriptions`: stripped, 1-200 characters (as principals' are)."""
    if not isinstance(tenant, str) or not tenant.strip() or len(tenant) > 200:
        raise InvalidToolError(f"invalid tenant name {tenant!r}: use 1-200 characters")
    return tenant.strip()


def check_json_schema(schema: Any, tool_name: str = "?", what: str = "input schema") -> dict[str, Any]:
    """Validate a schema describing an object, under the JSON Schema draft it follows (see schemas/drafts.py)."""
    import jsonschema  # loaded when a schema is first checked, not when a registry is read

    if schema is None:
        return dict(EMPTY_SCHEMA)
    if not isinstance(schema, dict):
        raise InvalidToolError(f"tool {tool_name!r}: {what} must be a JSON object, got {type(schema).__name__}")
    check_schema_depth(schema, tool_name, what)
    size = len(json.dumps(schema, ensure_ascii=False, default=str))
    if size > MAX_SCHEMA_CHARS:
        raise InvalidToolError(
            f"tool {tool_name!r}: {what} is {size:,} characters of JSON (at most {MAX_SCHEMA_CHARS:,})"
        )
    try:
        check_enums(schema)  # before the metaschema reads them
        validator_class(schema)
    except UnsafeSchema as exc:
        raise InvalidToolError(f"tool {tool_name!r}: {what}: {exc}") from None
    except jsonschema.SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(root)"
        raise InvalidToolError(f"tool {tool_name!r}: {what}: invalid JSON Schema at {where}: {exc.message}") from None
    try:
        check_safety(schema)
    except UnsafeSchema as exc:
        raise InvalidToolError(f"tool {tool_name!r}: {what}: {exc}") from None
    schema_type = schema.get("type", "object")
    if schema_type != "object":
        raise InvalidToolError(f"tool {tool_name!r}: {what} must have type 'object', got {schema_type!r}")
    return schema


def check_schema_depth(schema: Any, tool_name: str = "?", what: str = "input schema") -> None:
    """Refuse a schema nested deeper than any real one (schemas.drafts.MAX_DEPTH) before anything recursive reads it."""
    if deeper_than(schema):
        raise InvalidToolError(f"tool {tool_name!r}: {what}: nested deeper than {MAX_DEPTH} levels")


def example_key(text: str, tenant: str | None) -> tuple[str, str | None]:
    """What tells example requests apart: the text, spaces collapsed and case folded, and whose it is."""
    return " ".join(text.split()).casefold(), tenant


class ExampleRequest(BaseModel):
    """A request a person said the tool serves: one more view of the tool in retrieval, for the principals of its
    tenant (None: of every tenant that may use the tool), so a miss fixed by adding it stays fixed."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_EXAMPLE_CHARS)
    tenant: str | None = Field(default=None, description="whose searches it serves; None: every tenant's")
    source: Literal["operator", "usage", "written"] = Field(
        default="operator",
        description="written by an operator, promoted from a logged request, or written by the operator's chat model"
        " (`toolrag tools write-examples`)",
    )
    written_for: str | None = Field(
        default=None,
        max_length=64,
        description="for a chat model's example: the basis it was written for (the tool's text, the languages, the"
        " model and the prompt, hashed): written again when that changes",
    )
    task: bool = Field(
        default=False,
        description="a past task's request, given to every tool the task needed: it raises them together, and"
        " unlike a request about this tool alone it is no view of the tool's own in the order among them",
    )

    @property
    def key(self) -> tuple[str, str | None]:
        return example_key(self.text, self.tenant)

    def definition(self) -> dict[str, Any]:
        """As a tool's definition holds it: `task` and `written_for` only where set, so a tool whose examples were
        written before either field existed keeps its version hash."""
        unset = {name for name, value in (("task", self.task), ("written_for", self.written_for)) if not value}
        return self.model_dump(exclude=unset)

    @field_validator("text")
    @classmethod
    def _one_line(cls, value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError("an example request must not be blank")
        return value


MAX_REQUIREMENTS = 32


class Requirement(BaseModel):
    """Another tool this one needs: called before it, or to fill one of its parameters. Given in a catalog as the
    other tool's name, or as `{"tool": NAME, "parameter": "location", "optional": true}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(pattern=TOOL_NAME_PATTERN.pattern, description="the name of the tool needed")
    # An identifier, never prose: it reaches the model in `needed_as()` ("needed by X for `location`").
    parameter: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$", description="the parameter its output fills, if one"
    )
    optional: bool = Field(default=False, description="the tool can run without it (it helps, or only sometimes)")

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"tool": value} if isinstance(value, str) else value


RelationSource = Literal["declared", "inferred", "usage", "confirmed", "proposed"]


class ToolRelation(BaseModel):
    """One relation of a tool to `other`, as explain, the CLI and the console show it: its kind (`requires`: called
    before it or to fill `parameter`; `related`: called next with it), where it comes from and how strong it is."""

    other: str
    kind: Literal["requires", "related"]
    source: RelationSource
    strength: float = Field(ge=0.0, le=1.0, description="1 for declared and confirmed ones; else confidence or share")
    parameter: str | None = None
    learner: str | None = Field(default=None, description="the tenant whose sessions taught a `usage` relation")
    detail: str | None = Field(default=None, description="why: the field it returns, the sessions, who decided")
    rejected: bool = Field(default=False, description="an admin rejected it: never inferred nor learned again")


class Tool(BaseModel):
    """One tool of the registry: what it does, who may use it, and the full schema injected when selected."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    name: str
    description: str = Field(min_length=1, max_length=MAX_DESCRIPTION_CHARS)
    input_schema: dict[str, Any] = Field(default_factory=lambda: dict(EMPTY_SCHEMA))
    output_schema: dict[str, Any] | None = Field(default=None, description="the result's schema (MCP outputSchema)")
    annotations: dict[str, Any] | None = Field(default=None, description="MCP annotations: readOnlyHint, title, ...")
    category: str | None = None
    aliases: list[str] = Field(default_factory=list)
    not_for: str | None = None
    examples: list[ExampleRequest] = Field(
        default_factory=list,
        max_length=MAX_EXAMPLES,
        description="requests the tool serves, per tenant: extra views of it in retrieval (search/examples.py)",
    )
    tenant_descriptions: dict[str, str] = Field(
        default_factory=dict,
        description="an operator's description of the tool for one tenant's principals, by tenant: what they are"
        " shown and searched with instead of the source's (a view for that tenant only); syncs keep it",
    )
    requires: list[Requirement] = Field(
        default_factory=list,
        max_length=MAX_REQUIREMENTS,
        description="tools this one needs (search/relations.py): search brings them along when it returns this one",
    )
    scopes: list[str] = Field(default_factory=list, description="scopes a principal must hold, all of them")
    tenants: list[str] = Field(default_factory=list, description="tenants that may see the tool; empty = every tenant")
    source: str = "python"
    overrides: list[str] = Field(
        default_factory=list,
        description="source-owned fields an operator replaced, and `active` when an operator deactivated the tool:"
        " syncs keep them",
    )
    source_values: dict[str, Any] = Field(
        default_factory=dict,
        description="the source's own value of each field in `overrides`, kept current by syncs: what the field"
        " returns to when an operator drops the override",
    )
    return_direct: bool = Field(default=False, description="a successful call ends the agent loop with its result")
    active: bool = True
    version: int = 1
    created_at: datetime = Field(default_factory=utc_now)
    updated_at: datetime = Field(default_factory=utc_now)

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_tool_name(value)

    @field_validator("description")
    @classmethod
    def _strip_description(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("description must not be blank")
        return value

    @field_validator("tenant_descriptions")
    @classmethod
    def _tenant_texts(cls, values: dict[str, str]) -> dict[str, str]:
        return {check_tenant_name(tenant): check_description(text) for tenant, text in sorted(values.items())}

    @field_validator("input_schema", mode="before")
    @classmethod
    def _valid_schema(cls, value: Any, info: ValidationInfo) -> dict[str, Any]:
        if info.context and info.context.get("trusted") and isinstance(value, dict):
            return value
        return check_json_schema(value, info.data.get("name", "?"))

    @field_validator("output_schema", mode="before")
    @classmethod
    def _valid_output_schema(cls, value: Any, info: ValidationInfo) -> dict[str, Any] | None:
        if value is None or (info.context and info.context.get("trusted") and isinstance(value, dict)):
            return value
        return check_json_schema(value, info.data.get("name", "?"), "output schema")

    @field_validator("aliases", "scopes", "tenants")
    @classmethod
    def _clean_list(cls, values: list[str]) -> list[str]:
        cleaned = [v.strip() for v in values if v and v.strip()]
        return list(dict.fromkeys(cleaned))

    @field_validator("overrides")
    @classmethod
    def _source_fields(cls, values: list[str]) -> list[str]:
        known = SOURCE_FIELDS | {DEACTIVATED_BY_OPERATOR}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not an override (those are {', '.join(sorted(known))})")
        return sorted(set(values))

    @field_validator("source_values")
    @classmethod
    def _of_source_fields(cls, values: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(values) - SOURCE_FIELDS)
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not a field the source owns")
        return values

    def synced(self, upstream: Tool) -> Tool:
        """This tool after a sync from its source listed `upstream`: the source's fields (those an operator did not
        override) from `upstream`, the operators' fields kept (and the source's value of each of them recorded in
        `source_values`); the source's scopes are added, never taken away (a sync does not widen access), and the
        tool is active again unless an operator deactivated it."""
        fresh = {key: getattr(upstream, key) for key in SOURCE_FIELDS - set(self.overrides)}
        behind = {key: getattr(upstream, key) for key in SOURCE_FIELDS & set(self.overrides)}
        scopes = list(dict.fromkeys([*self.scopes, *upstream.scopes]))
        active = DEACTIVATED_BY_OPERATOR not in self.overrides
        update = {**fresh, "source_values": behind, "scopes": scopes, "source": upstream.source, "active": active}
        return self.model_copy(update=update)

    @model_validator(mode="after")
    def _requires_others(self) -> Tool:
        """A tool does not need itself, and each tool it needs is named once (the first mention is kept)."""
        if any(r.tool.lower() == self.name.lower() for r in self.requires):
            raise ValueError(f"tool {self.name!r} requires itself")
        unique: dict[str, Requirement] = {}
        for requirement in self.requires:
            unique.setdefault(requirement.tool.lower(), requirement)
        if len(unique) < len(self.requires):
            self.requires = list(unique.values())
        return self

    @model_validator(mode="after")
    def _descriptions_of_its_tenants(self) -> Tool:
        """A tenant's description is for one of the tool's tenants (any tenant when the tool is every tenant's)."""
        strangers = sorted(set(self.tenant_descriptions) - set(self.tenants)) if self.tenants else []
        if strangers:
            raise ValueError(
                f"description for tenant {strangers[0]!r}, who may not use the tool (its tenants: "
                f"{', '.join(self.tenants)})"
            )
        return self

    @model_validator(mode="after")
    def _examples_of_its_tenants(self) -> Tool:
        """An example serves one of the tool's tenants (or all of them); the same request twice for the same
        tenant is kept once."""
        for example in self.examples:
            if example.tenant is not None and self.tenants and example.tenant not in self.tenants:
                raise ValueError(f"example request for tenant {example.tenant!r}, who may not use the tool")
        seen: set[tuple[str, str | None]] = set()
        unique = []
        for example in self.examples:
            if example.key not in seen:
                seen.add(example.key)
                unique.append(example)
        if len(unique) < len(self.examples):  # assigned only then: an assignment counts the field as given
            self.examples = unique
        return self

    def seen_by(self, tenant: str | None, everything: bool = False) -> Tool:
        """The tool as one tenant's principals may read it: described for that tenant (`for_tenant`), without
        other tenants' example requests (their users' words) or names (who else shares it: a customer list), the
        tools it requires (names of tools the reader may not use among them) and an MCP server's text an operator
        replaced. `everything`: an operator's view, whole."""
        if everything:
            return self
        examples = [e for e in self.examples if e.tenant in (None, tenant)]
        tenants = [t for t in self.tenants if t == tenant]
        hidden = {"examples": examples, "tenants": tenants, "requires": [], "source_values": {}}
        return self.for_tenant(tenant).model_copy(update=hidden)

    def described_for(self, tenant: str | None) -> str | None:
        """The tenant's own description of the tool, None when its principals get the source's."""
        return self.tenant_descriptions.get(tenant) if tenant is not None else None

    def for_tenant(self, tenant: str | None) -> Tool:
        """The tool as it is shown to (rendered for, injected into the prompt of) a principal of `tenant`: with
        that tenant's description when an operator wrote one, and never with another tenant's (each of them is
        left out, so nothing downstream can show or count it)."""
        if not self.tenant_descriptions:
            return self
        own = self.described_for(tenant)
        if own is None:
            return self.model_copy(update={"tenant_descriptions": {}})
        return self.model_copy(update={"description": own, "tenant_descriptions": {tenant: own}})

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Tool:
        """Build a tool from untrusted data, turning pydantic's errors into one readable InvalidToolError."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            name = data.get("name", "?") if isinstance(data, dict) else "?"
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'tool'}: {err['msg']}" for err in exc.errors()
            )
            raise InvalidToolError(f"invalid tool {name!r}: {problems}") from None

    @classmethod
    def from_store(cls, data: str) -> Tool:
        """A tool as the store wrote it. Its schema was checked when it was registered, and checking a JSON
        Schema is slow (most of the time it takes to open a large registry), so it is not checked again."""
        return cls.model_validate_json(data, context={"trusted": True})

    def definition(self) -> dict[str, Any]:
        """The fields that define the tool; any change to them is a new version."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "category": self.category,
            "aliases": self.aliases,
            "not_for": self.not_for,
            "scopes": sorted(self.scopes),
            "tenants": sorted(self.tenants),
            "return_direct": self.return_direct,
            "active": self.active,
        } | {  # only when set, so the versions and hashes of tools without them stay as they were
            key: value
            for key, value in (
                ("output_schema", self.output_schema),
                ("annotations", self.annotations),
                ("examples", [e.definition() for e in self.examples] or None),
                ("tenant_descriptions", self.tenant_descriptions or None),
                ("source_values", self.source_values or None),
                ("requires", [r.model_dump(exclude_defaults=True) for r in self.requires] or None),
            )
            if value is not None
        }

    @property
    def content_hash(self) -> str:
        canonical = json.dumps(self.definition(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def purpose(self) -> str:
        """The first sentence of the description: what the tool is for."""
        first = _SENTENCE_END.split(self.description, maxsplit=1)[0].strip()
        return first if len(first) <= 240 else first[:237].rstrip() + "..."

    def card(self) -> CapabilityCard:
        return CapabilityCard(name=self.name, purpose=self.purpose(), not_for=self.not_for, scopes=list(self.scopes))


class CapabilityCard(BaseModel):
    """A compact (about 30-50 tokens) description of a tool, for listings and discovery results."""

    name: str
    purpose: str
    not_for: str | None = None
    scopes: list[str] = Field(default_factory=list)

    def text(self) -> str:
        parts = [f"{self.name}: {self.purpose}"]
        if self.not_for:
            parts.append(f"Not for: {self.not_for}")
        if self.scopes:
            parts.append(f"Needs: {', '.join(self.scopes)}")
        return " ".join(parts)


def caller_key(identity: str | None, user: str | None, tenant: str | None) -> str:
    """`Principal.caller` of a principal with this identity, user and tenant (identities are JSON arrays of their
    parts, access/policy.py; a principal without one is keyed by a JSON array of a kind of its own)."""
    return identity if identity is not None else json.dumps(["python", user, tenant])


def case_twin(names: Iterable[str]) -> tuple[str, str] | None:
    """The first two names that differ only in case, if any: a name stands for one tool whatever its case (calls,
    requirements and the search index read it so)."""
    taken: dict[str, str] = {}
    for name in names:
        if (other := taken.setdefault(name.casefold(), name)) != name:
            return other, name
    return None


def normalize_name(name: str) -> str:
    """`Github__Create-Issue` -> `githubcreateissue`."""
    return _NOT_TOLD_APART.sub("", name.lower())


def name_key(name: str) -> tuple[str, ...]:
    """A name as calls tell names apart (runtime/resolve.py): its segments (`.` and `__` separate them), each in lower
    case without `-` and `_`, empty ones dropped. `Tickets__Delete-Ticket` and `tickets..deleteTicket` ->
    ('tickets', 'deleteticket')."""
    return tuple(key for key in (normalize_name(part) for part in _SEGMENT_BOUNDARY.split(name)) if key)


def folded_name(name: str) -> str:
    """`name_key` as one string: `tickets.deleteticket`."""
    return ".".join(name_key(name))


MAX_OPTIONAL = 6  # parts of one deny pattern read two ways (at most 64 readings); past it, as `*`


@functools.lru_cache(maxsize=4096)
def folded_globs(pattern: str) -> tuple[str, ...]:
    """A `deny_tools` glob as it reads folded names (`folded_name`), as globs that `fnmatchcase` matches in linear
    time: letters in lower case, `__` a dot. A part read two ways gives two readings: `?` and a bracket expression
    listing `-` or `_` (which may fold away), and a `-` or `_` (nothing, or a segment boundary: `tickets.delete_ticket`
    reads `tickets.Delete__Ticket` too). A separator before `*` says something follows: `billing_*` reads
    `billingprod.run` (`billing_prod.run`) and `billing.run` (`billing__run`), not the bare `billing` a server is
    probed by. Dropping separators joins words: `billing.pay_*` reads
    `billing.payment_history` too. Every reading fails closed; a call spelled as a denied name is refused whatever
    it resolves to (runtime/gateway.py)."""
    readings = [""]
    optional = 0
    tokens = _GLOB_TOKEN.findall(pattern)
    for number, token in enumerate(tokens):
        following = tokens[number + 1] if number + 1 < len(tokens) else ""
        bracketed = len(token) > 2 and token.startswith("[") and token.endswith("]")
        ways: tuple[str, ...] = ()
        if token == "?" or (bracketed and _lists_a_separator(token[1:-1])):
            ways = ("", token.lower())  # nothing (a separator folded away), or the character
        elif token in ("-", "_") and following != "*":
            ways = ("", ".")  # within a segment, or at a boundary another name draws with `__` or `.`
        if ways:
            optional += 1
            if optional > MAX_OPTIONAL:
                readings = [reading + "*" for reading in readings]
            else:
                readings = [reading + way for way in ways for reading in readings]
            continue
        if token == "__":
            part = "."
        elif token in ("-", "_"):
            part = "?"  # before `*`: something follows
        elif token == "[":
            part = "[[]"  # a bracket that opens no expression is itself
        else:
            part = token.lower()
        readings = [reading + part for reading in readings]
    return tuple(dict.fromkeys(readings))


def _lists_a_separator(members: str) -> bool:
    """Whether a bracket expression's members hold `_` or `-` itself (not a range's dash, nor negated)."""
    if members.startswith("!"):
        return False
    return "_" in members or members.startswith("-") or members.endswith("-")


class Principal(BaseModel):
    """Who a request is made for. Visibility and execution rights derive from tenant, scopes and name rules only."""

    model_config = ConfigDict(frozen=True)

    user: str | None = None
    tenant: str | None = None
    scopes: frozenset[str] = frozenset()
    exact_scopes: frozenset[str] = Field(
        default=frozenset(),
        description="scopes held only as written, never as wildcards: an OAuth token's own (its `*` is a scope named"
        " `*`, not every scope); `scopes` are those an access rule grants",
    )
    allow_tools: frozenset[str] | None = Field(
        default=None, description="glob patterns of tool names this principal may use; None allows every name"
    )
    deny_tools: frozenset[str] = Field(default=frozenset(), description="glob patterns of tool names it may not use")
    identity: str | None = Field(
        default=None,
        description="who the principal stands for, as the access policy authenticated it (access/policy.py: a rule;"
        " an OAuth token's rule, issuer and subject); None for a principal made in Python code",
    )

    @field_validator("tenant")
    @classmethod
    def _tenant_or_none(cls, value: str | None) -> str | None:
        return value or None  # '' names no tenant (the usage log keeps it for records of unknown tenant)

    @field_validator("scopes", "exact_scopes", "allow_tools", "deny_tools", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any, info: ValidationInfo) -> Any:
        """`scopes="billing:write"` is one scope (a string is no set of its letters); anything else that is no
        collection of strings is refused in one line."""
        if isinstance(value, str):
            return frozenset({value})
        if value is None or (isinstance(value, Collection) and all(isinstance(item, str) for item in value)):
            return value
        raise TypeError(f"{info.field_name} is a set of strings, got {type(value).__name__}")  # one line, as it is

    @classmethod
    def anonymous(cls) -> Principal:
        return cls()

    def holds(self, scope: str) -> bool:
        """A held scope grants itself; of `scopes`, `ns:*` grants every `ns:...` scope and `*` grants all."""
        if scope in self.scopes or scope in self.exact_scopes or "*" in self.scopes:
            return True
        namespace = scope.split(":", 1)[0]
        return f"{namespace}:*" in self.scopes

    def may_name(self, name: str) -> bool:
        """Whether the name rules let this principal use a tool of that name."""
        if self.denying(name) is not None:
            return False
        return self.allow_tools is None or any(fnmatchcase(name, pattern) for pattern in self.allow_tools)

    def denying(self, name: str) -> str | None:
        """The first `deny_tools` pattern that matches the name, as written or as calls read it (`folded_name`):
        `tickets.delete_*` denies an upstream's `tickets.deleteTicket` and `tickets.Delete-Ticket`, which a call of
        `tickets.delete_ticket` resolves to. An allowance matches as written only: both ways fail closed."""
        if not self.deny_tools:
            return None
        folded = folded_name(name)
        return next(
            (
                pattern
                for pattern in sorted(self.deny_tools)
                if fnmatchcase(name, pattern) or any(fnmatchcase(folded, glob) for glob in folded_globs(pattern))
            ),
            None,
        )

    @property
    def has_name_rules(self) -> bool:
        return self.allow_tools is not None or bool(self.deny_tools)

    def can_use(self, tool: Tool) -> bool:
        return tool.active and self.may_see(tool)

    def may_see(self, tool: Tool) -> bool:
        """Whether this definition (any version, active or not) is one the principal's rules let it see."""
        return self.may_name(tool.name) and self.meets(tool.scopes, tool.tenants)

    def hidden_by(self, tool: Tool) -> str | None:
        """The rule that keeps the principal from using the tool (the first that does), None when it may use it."""
        denied = self.denying(tool.name)
        if denied is not None:
            return f"denied by deny_tools {denied}"
        if not self.may_name(tool.name):
            return "its name is not among the tools the principal's rules allow"
        if tool.tenants and self.tenant not in tool.tenants:
            return f"tenants {', '.join(tool.tenants)} only"
        missing = [scope for scope in tool.scopes if not self.holds(scope)]
        if missing:
            return f"needs scope {', '.join(missing)}"
        return None if tool.active else "inactive"

    def meets(self, scopes: Iterable[str], tenants: Collection[str]) -> bool:
        """Whether this principal holds every scope and belongs to one of the tenants (when any are named)."""
        if tenants and self.tenant not in tenants:
            return False
        return all(self.holds(scope) for scope in scopes)

    @property
    def caller(self) -> str:
        """The key of whose rate limits, usage log and learned usage these are: the identity, or for a principal
        made in Python code its user and tenant. Never the user alone: a token whose subject is "admin" is not the
        rule named "admin"."""
        return caller_key(self.identity, self.user, self.tenant)

    @property
    def visibility_key(self) -> tuple[object, ...]:
        """Two principals with equal keys see exactly the same tools."""
        return (self.tenant, self.scopes, self.exact_scopes, self.allow_tools, self.deny_tools)


class SignalScores(BaseModel):
    """Why a tool was chosen: the signals behind its score."""

    dense: float = Field(default=0.0, description="cosine of the request with the tool")
    lexical: float = Field(default=0.0, description="share of the request's best possible word score, in [0, 1]")
    fused: float = Field(
        default=0.0, description="the relative score that orders the request's candidates, in [0, 1] (1: the best)"
    )
    evidence: float = Field(
        default=0.0,
        description="how far the request's best tool beats its nearest small talk, beyond what small talk reaches"
        " in this registry; below 0 the request reads as needing no tool (search/confidence.py)",
    )
    name_match: bool = False
    routed_category: str | None = None
    always_included: bool = False
    reformulation: str | None = Field(
        default=None, description="the second-chance step that found the tool (expand, rewrite), if any"
    )
    needed_by: str | None = Field(
        default=None, description="the tool of the set that requires this one: it was added for that tool"
    )
    needed_for: str | None = Field(default=None, description="the parameter of `needed_by` that this tool fills")
    also_needs: list[str] = Field(
        default_factory=list,
        description="tools this one requires that did not fit the set (its token budget or tool count), nearest"
        " first: the agent asks for them by name",
    )
    related_to: str | None = Field(
        default=None,
        description="the tool of the set this one is related to (learned from usage, or confirmed by an admin):"
        " the request's ranking supported it, and it was added after that tool",
    )
    related_why: str | None = Field(
        default=None, description="where the relation comes from, and how strong it is (`related: 14 of 20 ...`)"
    )
    calibrated: bool = Field(
        default=True,
        description="False when the request's language is none of those the score was calibrated on (English,"
        " German, Ukrainian, Chinese, Spanish, French, Polish): the order holds, the probability is a rough guide",
    )


Strategy = Literal["retrieval", "all"]


class SearchResult(BaseModel):
    """One selected tool: the estimated probability that it is what the request needs, and why."""

    name: str
    score: float = Field(
        description="estimated probability in [0, 1] that the tool is relevant to the request, calibrated on the"
        " development sets (docs/benchmarks.md); 0 for tools always included by configuration"
    )
    signals: SignalScores
    card: CapabilityCard
    strategy: Strategy = Field(
        default="retrieval",
        description="`all`: the principal's whole catalog fits the token budget and was returned whole, by"
        " relevance; `retrieval`: the best tools were retrieved",
    )

    def also_needed(self) -> str | None:
        """What the tool requires beyond the set, for the agent to ask for: "also needs: a, b; ask find_tools for
        them by name"."""
        if not self.signals.also_needs:
            return None
        return f"also needs: {', '.join(self.signals.also_needs)}; ask find_tools for them by name"

    def needed_as(self) -> str | None:
        """Why the tool is in the set when another tool of it needs it: "needed by share_location for `location`"."""
        needer, parameter = self.signals.needed_by, self.signals.needed_for
        if needer is None:
            return None
        return f"needed by {needer}" + (f" for `{parameter}`" if parameter else "")
