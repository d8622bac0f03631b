"""OAuth 2.1 for the HTTP API and the HTTP gateway, as MCP's authorization specification has resource servers do.

- Protected resource metadata (RFC 9728) at `/.well-known/oauth-protected-resource<path>`, naming the issuer.
- A request without a token gets 401 with `WWW-Authenticate: Bearer ... resource_metadata="<that URL>"`, which
  MCP clients follow to the authorization server; a bad token gets 401 with `error="invalid_token"` and why; a
  token without a required scope 403 with `error="insufficient_scope"`.
- Access tokens are JWTs checked with PyJWT against the issuer's JWKS (or a configured public key): signature,
  issuer, audience (this server's resource URL), expiry. What a valid token may do is the access policy's
  (access/policy.py): the first rule its claims match gives its role and principal (user from `sub`, tenant and
  scopes from the token); else the configured groups its `groups_claim` names (access/groups.py); a token granted
  neither way is refused with 403.

Static bearer tokens keep working beside it. JWKS keys are cached and fetched without blocking anyone: one fetch at
a time, with a short timeout, awaited only by requests whose key is not known yet; an unknown key id starts a new
fetch at most once a minute, so tokens naming random keys can neither flood the issuer nor stall other requests.
The issuer's answer is untrusted too: it is read up to `jwks_max_bytes`, and parsed off the event loop only if it
holds at most `jwks_max_keys` keys (each key is built and checked: 4,001 keys held the loop).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import httpx
import jwt
from mcp.server.auth.routes import build_resource_metadata_url
from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, model_validator
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolrag.access import AccessPolicy, Caller, ClaimNames, Grant, GroupGrant, NotGranted, Role
from toolrag.access.guard import Authenticated, Authenticator, Refused, Scope

REFETCH_SECONDS = 60.0
FETCH_TIMEOUT_SECONDS = 5.0


class OAuthConfig(BaseModel):
    """`[oauth]` in the API's and the gateway's configuration."""

    model_config = ConfigDict(extra="forbid")

    issuer: str = Field(description="the authorization server's issuer identifier, exactly as in its tokens")
    audience: str = Field(description="this server's resource URL (e.g. https://tools.example.com/mcp)")
    jwks_url: str | None = Field(default=None, description="the issuer's JSON Web Key Set")
    public_key: str | None = Field(default=None, description="a PEM public key, for issuers without a JWKS")
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256", "PS256", "EdDSA"])
    required_scopes: list[str] = Field(default_factory=list, description="a token lacking one is refused (403)")
    user_claim: str = "sub"
    tenant_claim: str | None = "tenant"
    scopes_claim: str = Field(default="scope", description="space-separated scopes, or a list (e.g. `scp`)")
    groups_claim: str | None = Field(
        default=None,
        description="the claim listing the token's groups (a list, or one name): a token no rule matches gets what"
        " the [groups.NAME] it names grant (access/groups.py); unset, no token gets a group's rights",
    )
    leeway_seconds: int = Field(default=30, ge=0, le=300, description="clock skew allowed on exp and nbf")
    jwks_max_bytes: int = Field(default=262_144, ge=1024, description="a larger JWKS answer is refused")
    jwks_max_keys: int = Field(default=64, ge=1, description="a JWKS with more keys is refused")

    @model_validator(mode="before")
    @classmethod
    def _roles_moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and ({"roles", "default_role"} & data.keys()):
            raise ValueError(
                "[oauth] roles and default_role are gone: what a token may do comes from an access rule that matches"
                ' its claims, e.g. [tokens.ops] claims = { scope = "toolrag:admin" } role = "admin" (a token no rule'
                " matches is refused)"
            )
        return data

    @model_validator(mode="after")
    def _one_key_source(self) -> OAuthConfig:
        if (self.jwks_url is None) == (self.public_key is None):
            raise ValueError("[oauth] needs exactly one of jwks_url and public_key")
        if "none" in (a.lower() for a in self.algorithms) or any(a.upper().startswith("HS") for a in self.algorithms):
            raise ValueError("[oauth] algorithms must be asymmetric (RS*, ES*, PS*, EdDSA): the server holds no secret")
        return self

    def metadata_url(self) -> str:
        return str(build_resource_metadata_url(AnyHttpUrl(self.audience)))

    def metadata_routes(self) -> list[Route]:
        """The RFC 9728 document. The issuer and the resource are written exactly as configured: clients compare
        them with the issuer's own metadata and the tokens' audience character for character."""
        document: dict[str, Any] = {
            "resource": self.audience,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
        }
        scopes = sorted(self.required_scopes)
        if scopes:
            document["scopes_supported"] = scopes

        async def metadata(request: Request) -> JSONResponse:
            return JSONResponse(document, headers={"Access-Control-Allow-Origin": "*"})

        return [Route(urlparse(self.metadata_url()).path, metadata, methods=["GET"])]

    def challenge(self, error: str | None = None, description: str | None = None) -> str:
        """The WWW-Authenticate value of a refusal."""
        parts = ['Bearer realm="toolrag"', f'resource_metadata="{self.metadata_url()}"']
        if error:
            parts.append(f'error="{error}"')
        if description:
            parts.append('error_description="{}"'.format(description.replace('"', "'")))
        return ", ".join(parts)


def access_policy(
    grants: Mapping[str, Grant],
    default_role: Role,
    local: str | None,
    oauth: OAuthConfig | None,
    groups: Mapping[str, GroupGrant],
) -> AccessPolicy:
    """The policy of a server's rules and groups, reading OAuth claims as its `[oauth]` section says."""
    if oauth is None:
        return AccessPolicy(grants, default_role, local)
    names = ClaimNames(oauth.scopes_claim, oauth.user_claim, oauth.tenant_claim, oauth.groups_claim)
    return AccessPolicy(grants, default_role, local, names, groups)


def check_groups(groups: Mapping[str, GroupGrant], oauth: OAuthConfig | None) -> None:
    """Groups are reached through the token's groups claim: without one they could never apply."""
    if groups and (oauth is None or oauth.groups_claim is None):
        raise ValueError(f"[groups.{next(iter(groups))}] needs [oauth] with groups_claim (the claim naming groups)")


class JwtVerifier:
    def __init__(self, config: OAuthConfig, fetch_timeout: float = FETCH_TIMEOUT_SECONDS) -> None:
        self.config = config
        self.fetch_timeout = fetch_timeout
        self._keys: dict[str, Any] = {}
        self._fetched_at = -REFETCH_SECONDS
        self._fetching: asyncio.Task[None] | None = None
        self._last_error: str | None = None
        self._fixed = _checked_pem(config.public_key) if config.public_key else None

    async def verify(self, token: str) -> dict[str, Any]:
        """The token's claims; raises the guard's Refused (401 invalid_token, 403 insufficient_scope) saying what
        is wrong, with the challenge that goes with it."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise self._refused(401, "invalid_token", "the token is not a JWT") from None
        kid = header.get("kid")
        key = await self._key(kid if isinstance(kid, str) else None)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=self.config.algorithms,
                audience=self.config.audience,
                issuer=self.config.issuer,
                leeway=self.config.leeway_seconds,
                options={"require": ["exp", "iss", "aud", self.config.user_claim]},
            )
        except jwt.ExpiredSignatureError:
            raise self._refused(401, "invalid_token", "the token has expired") from None
        except jwt.InvalidAudienceError:
            raise self._refused(
                401, "invalid_token", f"the token is not for this server ({self.config.audience})"
            ) from None
        except jwt.InvalidIssuerError:
            raise self._refused(401, "invalid_token", "the token comes from another issuer") from None
        except jwt.InvalidSignatureError:
            raise self._refused(401, "invalid_token", "the token's signature does not verify") from None
        except jwt.MissingRequiredClaimError as exc:
            raise self._refused(401, "invalid_token", f"the token has no {exc.claim!r} claim") from None
        except jwt.PyJWTError as exc:
            raise self._refused(401, "invalid_token", f"the token is not valid: {exc}") from None
        missing = [scope for scope in self.config.required_scopes if scope not in self.scopes(claims)]
        if missing:
            raise self._refused(403, "insufficient_scope", f"the token lacks the scope {missing[0]!r}")
        return claims

    def refused(self, status: int, error: str, description: str) -> Refused:
        """A refusal with this issuer's challenge (for callers that refuse a valid token, e.g. the access policy)."""
        return self._refused(status, error, description)

    def _refused(self, status: int, error: str, description: str) -> Refused:
        return Refused(status, description, self.config.challenge(error, description))

    def scopes(self, claims: dict[str, Any]) -> list[str]:
        value = claims.get(self.config.scopes_claim, [])
        return value.split() if isinstance(value, str) else [str(scope) for scope in value]

    async def _key(self, kid: str | None) -> Any:
        if self._fixed is not None:
            return self._fixed
        found = self._known(kid)
        if found is None and (self._fetching is not None or time.monotonic() - self._fetched_at >= REFETCH_SECONDS):
            await self._fetch_once()
            found = self._known(kid)
        if found is None:
            why = f": {self._last_error}" if self._last_error and not self._keys else ""
            unknown = f"the token is signed with a key the issuer does not publish{why}"
            raise self._refused(401, "invalid_token", unknown)
        return found

    def _known(self, kid: str | None) -> Any:
        return self._keys.get(kid) if kid is not None else next(iter(self._keys.values()), None)

    async def _fetch_once(self) -> None:
        """Join the fetch in flight, or start one; either way wait for it at most `fetch_timeout`."""
        if self._fetching is None:
            self._fetched_at = time.monotonic()
            self._fetching = asyncio.get_running_loop().create_task(self._fetch())
        fetching = self._fetching
        try:
            await asyncio.wait_for(asyncio.shield(fetching), self.fetch_timeout)
        except TimeoutError:
            self._last_error = f"the issuer's keys did not arrive within {self.fetch_timeout:g} s"

    async def _fetch(self) -> None:
        assert self.config.jwks_url is not None
        try:
            body = await self._read_keys(self.config.jwks_url)
            keys = await asyncio.to_thread(_parsed_keys, body, self.config.jwks_max_keys)
            self._keys = {key.key_id: key for key in keys if key.key_id}
            self._last_error = None
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as exc:
            self._last_error = f"the issuer's keys could not be read: {exc}"
        finally:
            self._fetching = None

    async def _read_keys(self, url: str) -> bytes:
        """The issuer's answer, read no further than `jwks_max_bytes` (raises ValueError past it)."""
        limit = self.config.jwks_max_bytes
        body = bytearray()
        async with httpx.AsyncClient(timeout=self.fetch_timeout) as client, client.stream("GET", url) as answer:
            answer.raise_for_status()
            async for chunk in answer.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    raise ValueError(f"the answer is over {limit:,} bytes (jwks_max_bytes)")
        return bytes(body)


def _parsed_keys(body: bytes, max_keys: int) -> list[jwt.PyJWK]:
    """The keys of a JWKS answer, refused (ValueError) past `max_keys` before any key is built."""
    document = json.loads(body)
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise ValueError("the answer is not a JSON Web Key Set (no `keys` list)")
    if len(keys) > max_keys:
        raise ValueError(f"the answer holds {len(keys):,} keys, over the limit of {max_keys:,} (jwks_max_keys)")
    return list(jwt.PyJWKSet.from_dict(document).keys)


def _checked_pem(pem: str) -> str:
    """The configured PEM public key, once it is known to load."""
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        load_pem_public_key(pem.encode())
    except ValueError as exc:
        raise ValueError(f"[oauth] public_key is not a PEM public key: {exc}") from None
    return pem


def caller_authenticator(policy: AccessPolicy, verifier: JwtVerifier | None) -> Authenticator:
    """How the API and the HTTP gateway authenticate: a static token of the policy, else (with `[oauth]`) an access
    token of the issuer, which must then match one of the policy's rules or name one of its groups (403 when it does
    neither: deny by default)."""

    async def authenticate(token: str, scope: Scope) -> Authenticated[Caller] | None:
        caller = policy.for_token(token)
        if caller is None and verifier is not None:
            claims = await verifier.verify(token)  # or Refused, which the guard answers
            try:
                caller = policy.for_claims(claims)
            except NotGranted as refusal:
                raise verifier.refused(403, "insufficient_scope", str(refusal)) from None
        return None if caller is None else Authenticated(caller, caller.key)

    return authenticate
