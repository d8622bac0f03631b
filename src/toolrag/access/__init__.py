"""Who a request is for: every way in resolves to one `Caller` through one `AccessPolicy` (access/policy.py)."""

from toolrag.access.groups import GroupGrant
from toolrag.access.policy import NO_TOOLS, AccessPolicy, Caller, ClaimNames, Grant, TokenTable, check_grants
from toolrag.access.rights import ROLE_RANK, NotGranted, Role

__all__ = [
    "NO_TOOLS",
    "ROLE_RANK",
    "AccessPolicy",
    "Caller",
    "ClaimNames",
    "Grant",
    "GroupGrant",
    "NotGranted",
    "Role",
    "TokenTable",
    "check_grants",
]
