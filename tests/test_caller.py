"""The reading rules of `Caller`: what an admin, a tenant's reader, a principal without a tenant and a caller no
rule matched may see of tools and of the usage log. Pure functions of the caller: no server needed."""

from __future__ import annotations

from toolrag.access import AccessPolicy, Caller, Grant
from toolrag.model import ExampleRequest, Tool
from toolrag.store.usage import EVERYONE, Audience

POLICY = AccessPolicy(
    {
        "ops": Grant(role="admin", scopes=["*"], tenant="acme"),
        "acme-viewer": Grant(role="reader", tenant="acme"),
        "loner": Grant(role="agent"),
        "mail-only": Grant(role="reader", tenant="acme", servers=["email"]),
    },
    default_role="reader",
)
ACME_CRM = Tool(name="crm.vip", description="Look up a VIP customer.", tenants=["acme"])
SHARED = Tool(
    name="kb.search",
    description="Search the knowledge base.",
    examples=[
        ExampleRequest(text="acme asks", tenant="acme"),
        ExampleRequest(text="globex asks", tenant="globex"),
        ExampleRequest(text="anyone asks"),
    ],
)
GLOBEX_CRM = Tool(name="crm.globex", description="Globex's own customers.", tenants=["globex"])
SCOPED = Tool(name="billing.refund", description="Refund a payment.", scopes=["billing:write"])
RETIRED = Tool(name="email.old", description="The old mailer.", active=False)


def test_an_admin_sees_and_reads_everything() -> None:
    ops = POLICY.named("ops")
    assert ops.is_admin and ops.may_explain_for()
    assert all(ops.sees(tool) for tool in (ACME_CRM, GLOBEX_CRM, SCOPED, RETIRED))
    assert ops.view(SHARED) is SHARED  # whole: every tenant's example requests
    assert ops.audience() == EVERYONE
    assert ops.sees_version(GLOBEX_CRM)


def test_a_tenants_reader_sees_its_tenants_tools_and_records_only() -> None:
    viewer = POLICY.named("acme-viewer")
    assert not viewer.is_admin and not viewer.may_explain_for()
    assert viewer.sees(ACME_CRM) and viewer.sees(SHARED)
    assert not viewer.sees(GLOBEX_CRM) and not viewer.sees(SCOPED) and not viewer.sees(RETIRED)
    # globex's users' words left out:
    assert [e.text for e in viewer.view(SHARED).examples] == ["acme asks", "anyone asks"]
    assert viewer.audience() == Audience(tenant="acme", caller=viewer.key)
    assert viewer.sees_version(RETIRED.model_copy(update={"name": "email.older"}))  # an inactive version's rules
    assert not viewer.sees_version(GLOBEX_CRM)


def test_a_reader_of_a_shared_tool_is_not_told_who_else_shares_it() -> None:
    """An attacker's review: /tools/NAME gave acme's reader `tenants: ["acme", "globex", "initech"]`, the
    operator's customer list. A reader is told its own tenant only; an admin, all of them."""
    shared = Tool(name="crm.lookup", description="Look a customer up.", tenants=["acme", "globex", "initech"])
    assert POLICY.named("acme-viewer").view(shared).tenants == ["acme"]
    assert POLICY.named("ops").view(shared).tenants == ["acme", "globex", "initech"]


def test_a_principal_without_a_tenant_reads_only_its_own_records() -> None:
    loner = POLICY.named("loner")
    assert loner.audience() == Audience(tenant=None, caller=loner.key)
    assert loner.audience() != POLICY.named("ops").audience()
    assert not loner.sees(ACME_CRM)  # a tenant's tool is not for a caller of no tenant
    assert loner.sees(SHARED) and [e.text for e in loner.view(SHARED).examples] == ["anyone asks"]


def test_name_rules_limit_what_a_reader_sees() -> None:
    mail = POLICY.named("mail-only")
    assert not mail.sees(ACME_CRM)
    assert mail.sees(Tool(name="email.send", description="Send an email.", tenants=["acme"]))


def test_deny_by_default_a_caller_no_rule_matched_sees_nothing() -> None:
    nobody = POLICY.local()  # no local_principal: the stdio client is granted nothing
    assert not nobody.granted and not nobody.is_admin and not nobody.may_explain_for()
    assert not any(nobody.sees(tool) for tool in (ACME_CRM, GLOBEX_CRM, SCOPED, RETIRED))
    assert nobody.audience() == Audience(tenant=None, caller=nobody.key)
    # A caller that names the admin role but was granted nothing is no admin either.
    pretender = Caller("x", "admin", nobody.principal, nobody.key, granted=False)
    assert not pretender.is_admin and not pretender.sees(GLOBEX_CRM) and pretender.audience() != EVERYONE
