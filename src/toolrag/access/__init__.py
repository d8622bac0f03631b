"""Who a request is for: every way in resolves to one `Caller` through one `AccessPolicy` (access/policy.py)."""

from toolrag.access.policy import NO_TOOLS, ROLE_RANK, AccessPolicy, Caller, Grant, Role, TokenTable, check_grants

__all__ = ["NO_TOOLS", "ROLE_RANK", "AccessPolicy", "Caller", "Grant", "Role", "TokenTable", "check_grants"]
