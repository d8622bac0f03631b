"""OAuth 2.1 for the HTTP gateway and the HTTP API, against an issuer the test runs on loopback (keys generated
here, a JWKS and a client-credentials token endpoint): the official MCP SDK client completes the flow and calls a
tool; every bad token is refused with the right status and challenge."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import httpx
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from typer.testing import CliRunner

from toolrag import ToolRegistry, tool
from toolrag.access import Grant
from toolrag.access.guard import Refused
from toolrag.access.oauth import JwtVerifier, OAuthConfig
from toolrag.access.rate_limit import Rate, RateLimits
from toolrag.server.app import create_app
from toolrag.server.config import ApiConfig
from toolrag.usagelog import MonitorConfig

from .conftest import RETRIEVAL, SAMPLE_TOOLS, CountingEmbedder, json_http_server
from .mcp_support import TOOLRAG, free_port, python_server, stop_tree, wait_until_listening
from .test_api import serving

CLIENT_SECRET = "client-secret-0123456789"
STRANGER = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # signs tokens with a key nobody publishes
# What the issuer grants each client, whatever it asks for (as authorization servers do for client credentials).
CLIENTS = {"orders-agent": "mcp orders:read", "support-agent": "mcp"}


@tool(name="billing.refund_payment", scopes=["billing:write"])
def refund_payment(payment_id: str) -> str:
    """Refund a card payment to the customer, in full."""
    return f"refunded {payment_id}"


class Issuer:
    """An authorization server: its metadata, a JWKS, and client-credentials tokens for one client."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "key-1"
        self.url = ""

    def token(self, audience: str, scope: str = "", **changes: Any) -> str:
        now = int(time.time())
        claims = {"iss": self.url, "aud": audience, "sub": "agent-7", "tenant": "acme", "scope": scope}
        claims |= {"iat": now, "exp": now + 300, "client_id": "orders-agent", **changes}
        key = changes.pop("_key", None) or self.key
        claims.pop("_key", None)
        kid = changes.pop("_kid", None) or self.kid
        claims.pop("_kid", None)
        return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "token_endpoint": f"{self.url}/token",
            "authorization_endpoint": f"{self.url}/authorize",
            "jwks_uri": f"{self.url}/jwks.json",
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            "response_types_supported": ["code"],
        }


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    authority = Issuer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answers = {"/.well-known/oauth-authorization-server": authority.metadata, "/jwks.json": authority.jwks}
            if self.path not in answers:
                self._send(404, {"error": "not_found"})
                return
            self._send(200, answers[self.path]())

        def do_POST(self) -> None:
            form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            client, _, secret = (
                base64.b64decode(self.headers.get("Authorization", "Basic ")[6:]).decode().partition(":")
            )
            if self.path != "/token" or client not in CLIENTS or secret != CLIENT_SECRET:
                self._send(401, {"error": "invalid_client"})
                return
            audience = form.get("resource", [""])[0]
            access = authority.token(audience, CLIENTS[client], client_id=client)
            self._send(200, {"access_token": access, "token_type": "Bearer", "expires_in": 300})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    authority.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield authority
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def gateway(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`toolrag mcp serve --transport http` with [oauth], in its own process, in front of two fixture MCP servers:
    `shop` (whose tools need the scope orders:read), which tokens of tenant acme may use but for its `add_tool`, and
    `payroll`, which no rule grants; its URL."""
    folder = tmp_path_factory.mktemp("oauth")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    upstream = python_server("tests.mcp_fixture_server")
    (folder / "toolrag-mcp.toml").write_text(
        f"""store = "gateway.db"

[oauth]
issuer = "{issuer.url}"
audience = "{url}"
jwks_url = "{issuer.url}/jwks.json"
required_scopes = ["mcp"]

[schedule]
consistency = "off"
report = "off"

[servers.shop]
command = {json.dumps(upstream["command"])}
args = {json.dumps(upstream["args"])}
cwd = {json.dumps(upstream["cwd"])}
scopes = ["orders:read"]

[servers.payroll]
command = {json.dumps(upstream["command"])}
args = {json.dumps(upstream["args"])}
cwd = {json.dumps(upstream["cwd"])}

[principals.acme-agents]
claims = {{ tenant = "acme" }}
servers = ["shop"]
deny_tools = ["shop.add_tool"]
""",
        encoding="utf-8",
    )
    command = [TOOLRAG, "mcp", "serve", "-c", str(folder / "toolrag-mcp.toml"), "--transport", "http"]
    process = subprocess.Popen(
        [*command, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        wait_until_listening(url, process)
        yield url
    finally:
        stop_tree(process.pid)


def initialize(url: str, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    return httpx.post(url, json=body, headers=headers, timeout=10)


def test_a_request_without_a_token_is_pointed_at_the_resource_metadata(issuer: Issuer, gateway: str) -> None:
    refused = initialize(gateway, None)
    assert refused.status_code == 401
    metadata_url = gateway.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert f'resource_metadata="{metadata_url}"' in refused.headers["www-authenticate"]
    metadata = httpx.get(metadata_url).json()  # public: no token needed
    assert metadata["resource"] == gateway and metadata["authorization_servers"] == [issuer.url]


def test_a_valid_access_token_is_served(issuer: Issuer, gateway: str) -> None:
    assert initialize(gateway, issuer.token(gateway, "mcp")).status_code == 200


def test_an_access_token_no_rule_matches_finds_and_calls_nothing(issuer: Issuer, gateway: str) -> None:
    """Issue 25, finding 1: a valid token of the issuer for a subject and tenant no rule names was served as if it
    could use every upstream tool. Deny by default: it is refused, saying why."""
    for token in (
        issuer.token(gateway, "mcp", sub="stranger", tenant="globex"),
        issuer.token(gateway, "mcp", tenant=""),
    ):
        refused = initialize(gateway, token)
        assert refused.status_code == 403 and "no access rule" in refused.json()["detail"]
        assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]


def test_the_rule_an_access_token_matches_limits_servers_and_tools(issuer: Issuer, gateway: str) -> None:
    """Issue 25, finding 1: `servers` and `deny_tools` apply to OAuth callers as to static tokens."""

    async def session() -> tuple[list[str], dict[str, bool]]:
        token = issuer.token(gateway, "mcp orders:read", sub="someone-new")
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
        async with Client(streamable_http_client(gateway, http_client=http)) as client:
            found = await client.call_tool("find_tools", {"query": "look up an order, or add a tool", "k": 5})
            names = [t["name"] for t in found.structured_content["tools"]]
            calls = {}
            for name in ("shop.lookup_order", "shop.add_tool", "payroll.lookup_order"):
                arguments = {"order_id": "42"} if "lookup" in name else {"name": "x", "description": "y"}
                ran = await client.call_tool("call_tool", {"name": name, "arguments": arguments})
                calls[name] = not ran.is_error
            return names, calls

    names, calls = anyio.run(session)
    assert "shop.lookup_order" in names and not any(n.startswith("payroll.") or n == "shop.add_tool" for n in names)
    assert calls == {"shop.lookup_order": True, "shop.add_tool": False, "payroll.lookup_order": False}


@pytest.mark.parametrize(
    ("case", "status", "error", "why"),
    [
        ("expired", 401, "invalid_token", "expired"),
        ("wrong audience", 401, "invalid_token", "not for this server"),
        ("wrong issuer", 401, "invalid_token", "another issuer"),
        ("tampered", 401, "invalid_token", "signature"),
        ("unknown key", 401, "invalid_token", "key the issuer does not publish"),
        ("not a JWT", 401, "invalid_token", "not a JWT"),
        ("missing scope", 403, "insufficient_scope", "'mcp'"),
    ],
)
def test_bad_tokens_are_refused(issuer: Issuer, gateway: str, case: str, status: int, error: str, why: str) -> None:
    tokens = {
        "expired": lambda: issuer.token(gateway, "mcp", exp=int(time.time()) - 600),
        "wrong audience": lambda: issuer.token("https://elsewhere.example/mcp", "mcp"),
        "wrong issuer": lambda: issuer.token(gateway, "mcp", iss="https://evil.example"),
        "tampered": lambda: _tampered(issuer.token(gateway, "mcp")),
        "unknown key": lambda: issuer.token(gateway, "mcp", _key=STRANGER, _kid=f"key-{uuid.uuid4().hex}"),
        "not a JWT": lambda: "opaque-token-0123456789",
        "missing scope": lambda: issuer.token(gateway, "billing:write"),
    }
    refused = initialize(gateway, tokens[case]())
    challenge = refused.headers["www-authenticate"]
    assert refused.status_code == status and f'error="{error}"' in challenge and why in challenge
    assert "resource_metadata=" in challenge and why in refused.json()["detail"]


def _tampered(token: str) -> str:
    """The token with its payload rewritten (more scopes) and the original signature kept."""
    head, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["scope"] = "mcp billing:write admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{head}.{forged}.{signature}"


class MemoryTokens:
    """The SDK client's token storage."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def test_the_mcp_sdk_client_completes_the_flow_and_calls_a_tool(issuer: Issuer, gateway: str) -> None:
    """Discovery from the 401, the issuer's metadata, a client-credentials token for this resource, then calls; the
    token's scopes are the principal's, so the order tool is found and runs for the client granted orders:read."""
    storage = MemoryTokens()

    async def session(client_id: str) -> list[str]:
        auth = ClientCredentialsOAuthProvider(gateway, storage, client_id, CLIENT_SECRET, issuer=issuer.url)
        transport = streamable_http_client(gateway, http_client=httpx2.AsyncClient(auth=auth, timeout=30))
        async with Client(transport) as client:
            found = await client.call_tool("find_tools", {"query": "look up the status of my order 42"})
            names = [t["name"] for t in found.structured_content["tools"]]
            if "shop.lookup_order" in names:
                ran = await client.call_tool(
                    "call_tool", {"name": "shop.lookup_order", "arguments": {"order_id": "42"}}
                )
                assert not ran.is_error and "order 42: shipped" in ran.content[0].text
            return names

    assert "shop.lookup_order" in anyio.run(session, "orders-agent")
    assert storage.tokens is not None
    assert jwt.decode(storage.tokens.access_token, options={"verify_signature": False})["aud"] == gateway
    storage.tokens = None
    assert "shop.lookup_order" not in anyio.run(session, "support-agent")  # the token's scopes are the principal's


def test_the_api_takes_access_tokens_with_roles_from_their_rules(issuer: Issuer, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    oauth = OAuthConfig(issuer=issuer.url, audience=url, jwks_url=f"{issuer.url}/jwks.json")
    rules = {
        "agents": Grant(claims={"scope": "toolrag:agent"}, role="agent"),
        "readers": Grant(claims={"scope": ["mcp", "billing:write"]}),
    }
    registry = ToolRegistry(tmp_path / "api.db")
    registry.register(refund_payment)
    registry.register_many(SAMPLE_TOOLS)
    with serving(create_app(registry, ApiConfig(oauth=oauth, tokens=rules)), port=port):
        missing = httpx.post(f"{url}/search", json={"query": "refund"})
        assert missing.status_code == 401 and "resource_metadata=" in missing.headers["www-authenticate"]
        assert httpx.get(f"{url}/.well-known/oauth-protected-resource").json()["resource"] == url

        def as_token(scope: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {issuer.token(url, scope)}"}

        found = httpx.post(  # the first search loads the model and the issuer's keys: slow on a busy machine
            f"{url}/search", json={"query": "refund the card payment"}, headers=as_token("billing:write"), timeout=120
        )
        assert found.status_code == 200 and "billing.refund_payment" in [r["name"] for r in found.json()["results"]]
        hidden = httpx.post(f"{url}/search", json={"query": "refund the card payment"}, headers=as_token("mcp"))
        assert "billing.refund_payment" not in [r["name"] for r in hidden.json()["results"]]
        execute = {"name": "billing.refund_payment", "arguments": {"payment_id": "p1"}}
        reader = httpx.post(f"{url}/execute", json=execute, headers=as_token("billing:write"))
        assert reader.status_code == 403  # no role scope: a reader
        agent = httpx.post(f"{url}/execute", json=execute, headers=as_token("billing:write toolrag:agent"))
        assert agent.status_code == 200 and agent.json()["content"] == "refunded p1"
        tenant = httpx.get(f"{url}/health", headers=as_token("toolrag:agent")).json()
        assert tenant["generation"] is None  # not an admin
        unmatched = httpx.post(f"{url}/search", json={"query": "refund"}, headers=as_token("calendar:read"))
        assert unmatched.status_code == 403 and "no access rule" in unmatched.json()["detail"]


def test_the_old_role_mapping_is_refused_with_what_replaces_it() -> None:
    with pytest.raises(ValueError, match="claims = "):
        OAuthConfig(issuer="https://i", audience="https://a", jwks_url="https://i/jwks", default_role="reader")


def test_oauth_configuration_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="exactly one of jwks_url and public_key"):
        OAuthConfig(issuer="https://id.example", audience="https://tools.example/mcp")
    with pytest.raises(ValueError, match="must be asymmetric"):
        OAuthConfig(issuer="https://i", audience="https://a", jwks_url="https://i/jwks", algorithms=["HS256"])


def test_issue25_finding5_a_slow_issuer_never_stalls_other_requests(issuer: Issuer, tmp_path: Path) -> None:
    """A token naming an unknown key made the server fetch the issuer's keys inside the request loop: with a slow
    issuer every request waited. Now the fetch is awaited only by the requests that need it."""
    asked, release = threading.Event(), threading.Event()

    def slow_keys(path: str, body: None, raw: str) -> tuple[int, dict[str, Any]]:
        asked.set()
        release.wait(60)
        return 200, issuer.jwks()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    static = "static-token-0123456789"
    rules = {"ops": Grant(token=static, role="admin"), "agents": Grant(claims={"scope": "mcp"})}
    registry = ToolRegistry(tmp_path / "api.db")
    registry.register_many(SAMPLE_TOOLS)
    with json_http_server(slow_keys) as keys_url:
        oauth = OAuthConfig(issuer=issuer.url, audience=url, jwks_url=f"{keys_url}/k")
        try:
            with serving(create_app(registry, ApiConfig(oauth=oauth, tokens=rules)), port=port):
                stranger = issuer.token(url, "mcp", _key=STRANGER, _kid="unknown-key")
                waiting = threading.Thread(
                    target=lambda: httpx.get(
                        f"{url}/health", headers={"Authorization": f"Bearer {stranger}"}, timeout=90
                    )
                )
                waiting.start()
                assert asked.wait(30), "the server never asked the issuer for its keys"
                # The issuer holds the fetch; a request with another token is answered meanwhile.
                health = httpx.get(f"{url}/health", headers={"Authorization": f"Bearer {static}"}, timeout=10)
                assert health.status_code == 200 and not release.is_set()
                release.set()
                waiting.join(60)
        finally:
            release.set()  # the held fetch ends before the key server stops


def test_issue25_one_policy_gives_every_entry_point_the_same_tools(issuer: Issuer, tmp_path: Path) -> None:
    """One rule, reached by a static token, an OAuth token, the stdio client and Python code, grants the same tools
    at every entry point: the gateway over stdio and HTTP, the API, deferred loading, and each framework adapter.
    A token no rule matches gets nothing anywhere; a stdio client of a gateway without local_principal neither."""
    from toolrag.cli.app import app as cli
    from toolrag.integrations.langchain import langchain_tools
    from toolrag.integrations.llamaindex import ToolragObjectRetriever
    from toolrag.integrations.openai_agents import tools_for
    from toolrag.mcp.config import load_config
    from toolrag.runtime.native import DeferredTools
    from toolrag.runtime.toolbox import Toolbox
    from toolrag.server.config import load_api_config
    from toolrag.server.serve import build_api

    from .mcp_support import http_client, http_gateway, stdio_gateway

    static = "support-token-0123456789"
    gateway_port, api_port = free_port(), free_port()
    upstream = python_server("tests.mcp_fixture_server")
    server = "\n".join(f"{key} = {json.dumps(upstream[key])}" for key in ("command", "args", "cwd"))
    rule = f'token = "{static}"\nclaims = {{ scope = "support" }}\nservers = ["shop"]\ndeny_tools = ["shop.add_tool"]\n'
    oauth = f'[oauth]\nissuer = "{issuer.url}"\njwks_url = "{issuer.url}/jwks.json"\n'
    schedule = '[schedule]\nconsistency = "off"\nreport = "off"\n'
    (tmp_path / "gateway.toml").write_text(
        f'store = "tools.db"\nlocal_principal = "support"\n{schedule}{oauth}audience = "http://127.0.0.1:{gateway_port}/mcp"\n'
        f"[servers.shop]\n{server}\n[servers.payroll]\n{server}\n[principals.support]\n{rule}[principals.other]\n"
        'claims = { scope = "other" }\nservers = ["payroll"]\n'
    )
    (tmp_path / "api.toml").write_text(
        f'store = "tools.db"\nmcp_config = "gateway.toml"\n{schedule}{oauth}audience = "http://127.0.0.1:{api_port}"\n'
        f'[tokens.support]\nrole = "agent"\n{rule}'
    )
    assert CliRunner().invoke(cli, ["mcp", "sync", "-c", str(tmp_path / "gateway.toml")]).exit_code == 0
    expected = {"shop.lookup_order", "shop.repeat", "shop.wait"}
    query = "look up an order, repeat a text, wait, add a tool"

    async def found(client: Any) -> set[str]:
        answer = await client.call_tool("find_tools", {"query": query, "k": 5})
        return {tool["name"] for tool in answer.structured_content["tools"]}

    async def over_stdio(config: Path) -> set[str]:
        async with stdio_gateway(config) as client:
            return await found(client)

    async def over_http(url: str, token: str) -> set[str]:
        async with http_client(url, token, timeout=120) as client:
            return await found(client)

    seen: dict[str, set[str]] = {"stdio": anyio.run(over_stdio, tmp_path / "gateway.toml")}
    gateway_token = issuer.token(f"http://127.0.0.1:{gateway_port}/mcp", "support", sub="kim")
    with http_gateway(tmp_path / "gateway.toml", port=gateway_port) as url:
        seen["gateway, static token"] = anyio.run(over_http, url, static)
        seen["gateway, OAuth"] = anyio.run(over_http, url, gateway_token)
        stranger = issuer.token(url, "nothing-granted", sub="eve")
        assert initialize(url, stranger).status_code == 403
    api_url = f"http://127.0.0.1:{api_port}"
    with serving(build_api(load_api_config(tmp_path / "api.toml")), port=api_port):
        for way, token in (("static token", static), ("OAuth", issuer.token(api_url, "support", sub="kim"))):
            listed = httpx.get(f"{api_url}/tools", headers={"Authorization": f"Bearer {token}"}, timeout=60)
            seen[f"API, {way}"] = {tool["name"] for tool in listed.json()}
        eve = issuer.token(api_url, "nothing-granted", sub="eve")
        assert httpx.get(f"{api_url}/tools", headers={"Authorization": f"Bearer {eve}"}).status_code == 403
    principal = load_config(tmp_path / "gateway.toml").policy().named("support").principal
    registry = ToolRegistry(tmp_path / "tools.db")
    toolbox = Toolbox(registry, principal)
    seen["Python: visible tools"] = {tool.name for tool in registry.visible_tools(principal)}
    seen["Python: Toolbox"] = set(toolbox.tools)
    seen["deferred loading"] = {tool.name for tool in DeferredTools(registry, principal).find({"query": query, "k": 5})}
    seen["LangChain"] = {tool.metadata["toolrag_name"] for tool in langchain_tools(toolbox, toolbox.select(query, 5))}
    seen["LlamaIndex"] = {
        tool.metadata.name.replace("__", ".") for tool in ToolragObjectRetriever(toolbox, 5).retrieve(query)
    }
    seen["OpenAI Agents"] = {tool.name.replace("__", ".") for tool in tools_for(toolbox, query, 5)}
    assert all(names == expected for names in seen.values()), seen
    text = (tmp_path / "gateway.toml").read_text().replace('local_principal = "support"\n', "")
    (tmp_path / "gateway.toml").write_text(text)

    async def refused() -> None:
        async with stdio_gateway(tmp_path / "gateway.toml") as client:
            answer = await client.call_tool("find_tools", {"query": query})
            assert answer.is_error and "local_principal" in answer.content[0].text

    anyio.run(refused)


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        ("keys", "holds 100 keys, over the limit of 64 (jwks_max_keys)"),
        ("bytes", "over 262,144 bytes (jwks_max_bytes)"),
    ],
)
def test_issue31_the_issuers_keys_are_bounded_in_bytes_and_count(issuer: Issuer, shape: str, reason: str) -> None:
    """The JWKS answer was parsed on the event loop with no bound on its size or its keys (4,001 keys were each built
    and checked). Now an answer past jwks_max_bytes stops being read, one past jwks_max_keys is refused before a key
    is built, and the token is refused saying why, even though its key is among them."""
    public = issuer.jwks()["keys"][0]
    if shape == "keys":  # 100 keys (45 KB): the issue's 4,001 would meet the byte bound first
        document = {"keys": [*({**public, "kid": f"decoy-{n}"} for n in range(99)), public]}
    else:
        document = {"keys": [public], "padding": "x" * 400_000}
    with json_http_server(lambda path, body, raw: (200, document)) as keys_url:
        audience = "https://tools.example"
        verifier = JwtVerifier(OAuthConfig(issuer=issuer.url, audience=audience, jwks_url=f"{keys_url}/jwks.json"))
        token = issuer.token(audience, "mcp")
        with pytest.raises(Refused, match=re.escape(reason)):
            anyio.run(verifier.verify, token)


# -- the third security review (issue 31) ---------------------------------------------------------------------------


ADMIN_STATIC, AGENT_A_STATIC = "admin-static-token-0123", "agent-a-static-token-0123"


@contextmanager
def rules_and_oauth(issuer: Issuer, tmp_path: Path, embedder: CountingEmbedder) -> Iterator[tuple[str, ToolRegistry]]:
    """The API with the static rules "admin" (no tenant) and "agent-a" (tenant acme), a rule for any access token
    of scope mcp, and a search rate of two at once; its URL and registry."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = ApiConfig(
        oauth=OAuthConfig(issuer=issuer.url, audience=url, jwks_url=f"{issuer.url}/jwks.json"),
        tokens={
            "admin": Grant(token=ADMIN_STATIC, role="admin"),
            "agent-a": Grant(token=AGENT_A_STATIC, role="agent", tenant="acme"),
            "idp-agents": Grant(claims={"scope": "mcp"}, role="agent"),
        },
        rate_limits=RateLimits(search=Rate(per_minute=1, burst=2)),
    )
    registry = ToolRegistry(tmp_path / "api.db", embedder, RETRIEVAL, monitor=MonitorConfig(flush_seconds=0.05))
    registry.register_many(SAMPLE_TOOLS)
    with serving(create_app(registry, config), port=port):
        yield url, registry


def _search(url: str, token: str, query: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.post(f"{url}/search", json={"query": query}, headers=headers, timeout=30).status_code


def test_issue31_a_token_whose_subject_is_admin_reads_only_its_own_usage(
    issuer: Issuer, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    """The usage log's view of a caller without a tenant was keyed on its label: a token whose subject is "admin"
    read the admin rule's requests on /reports/health and the dashboard. It is keyed by identity now."""
    with rules_and_oauth(issuer, tmp_path, embedder) as (url, registry):
        posing = issuer.token(url, "mcp", sub="admin", tenant=None)
        assert _search(url, ADMIN_STATIC, "tell me a joke about my cat Murzik") == 200
        assert _search(url, posing, "what is the weather in Lviv") == 200
        assert registry.usage is not None
        registry.usage.flush()
        admin_view = httpx.get(f"{url}/reports/health?days=1", headers={"Authorization": f"Bearer {ADMIN_STATIC}"})
        assert "Murzik" in admin_view.text  # the admin's request, shown to operators
        headers = {"Authorization": f"Bearer {posing}"}
        report = httpx.get(f"{url}/reports/health?days=1", headers=headers, timeout=30)
        page = httpx.get(f"{url}/console/dashboard", headers=headers, timeout=30)
        assert report.status_code == 200 and page.status_code == 200
        assert "Murzik" not in report.text and "Murzik" not in page.text
        assert report.json()["totals"]["retrievals"] == 1  # its own search only


def test_issue31_a_token_with_a_rule_s_subject_and_tenant_has_its_own_rate(
    issuer: Issuer, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    """Rate-limit buckets were keyed on tenant and user: a token with agent-a's subject and tenant spent the rule
    agent-a's rate. Buckets are keyed by identity now."""
    with rules_and_oauth(issuer, tmp_path, embedder) as (url, _):
        posing = issuer.token(url, "mcp", sub="agent-a", tenant="acme")
        assert [_search(url, posing, "weather in Kyiv") for _ in range(3)] == [200, 200, 429]
        assert _search(url, AGENT_A_STATIC, "weather in Kyiv") == 200  # agent-a's own bucket is untouched


def test_issue31_an_access_token_s_scopes_are_literal(
    issuer: Issuer, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    """A token's own scope strings got toolrag's wildcards: an issuer's `*` or `billing:*` granted every scope to any
    rule the token matched. They are held as written; only a rule's own scopes are patterns."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    oauth = OAuthConfig(issuer=issuer.url, audience=url, jwks_url=f"{issuer.url}/jwks.json")
    rules = {
        "finance": Grant(claims={"scope": "finance"}, scopes=["billing:*"]),
        "anyone": Grant(claims={"scope": "mcp"}),
    }
    registry = ToolRegistry(tmp_path / "api.db", embedder)
    registry.register(refund_payment)
    registry.register_many(SAMPLE_TOOLS)
    with serving(create_app(registry, ApiConfig(oauth=oauth, tokens=rules)), port=port):

        def finds_the_refund(scope: str) -> bool:
            headers = {"Authorization": f"Bearer {issuer.token(url, scope)}"}
            found = httpx.post(f"{url}/search", json={"query": "refund the card payment"}, headers=headers)
            assert found.status_code == 200, found.text
            return "billing.refund_payment" in [r["name"] for r in found.json()["results"]]

        assert not finds_the_refund("mcp *")
        assert not finds_the_refund("mcp billing:*")
        assert finds_the_refund("mcp billing:write")  # the scope itself, as written
        assert finds_the_refund("finance")  # the rule's own billing:* is a pattern
