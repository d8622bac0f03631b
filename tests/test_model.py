from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolrag import InvalidToolError, Principal, Tool
from toolrag.model import check_tool_name


@pytest.mark.parametrize("name", ["github.create_issue", "a", "x-y_z.1", "A" * 128])
def test_valid_names(name: str) -> None:
    assert check_tool_name(name) == name


@pytest.mark.parametrize("name", ["", "has space", "emoji😀", "a/b", "A" * 129, "semi;colon"])
def test_bad_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(InvalidToolError, match="invalid tool name"):
        Tool.parse({"name": name, "description": "d"})


@given(st.text(min_size=1, max_size=140))
def test_name_validation_never_crashes(name: str) -> None:
    try:
        tool = Tool.parse({"name": name, "description": "d"})
    except InvalidToolError:
        return
    assert tool.name == name


def test_bad_json_schema_names_the_place() -> None:
    with pytest.raises(InvalidToolError, match=r"invalid JSON Schema at properties/city"):
        Tool.parse(
            {
                "name": "t",
                "description": "d",
                "input_schema": {"type": "object", "properties": {"city": {"type": "strng"}}},
            }
        )


def test_schema_must_describe_an_object() -> None:
    with pytest.raises(InvalidToolError, match="type 'object'"):
        Tool.parse({"name": "t", "description": "d", "input_schema": {"type": "array"}})


def test_blank_description_and_unknown_fields_are_refused() -> None:
    with pytest.raises(InvalidToolError, match="description"):
        Tool.parse({"name": "t", "description": "   "})
    with pytest.raises(InvalidToolError, match="colour"):
        Tool.parse({"name": "t", "description": "d", "colour": "red"})


def test_content_hash_follows_the_definition_only() -> None:
    tool = Tool.parse({"name": "t", "description": "Does things."})
    assert tool.content_hash == tool.model_copy(update={"version": 7}).content_hash
    assert tool.content_hash != tool.model_copy(update={"description": "Does other things."}).content_hash
    assert tool.content_hash != tool.model_copy(update={"scopes": ["a:b"]}).content_hash


def test_capability_card_is_compact() -> None:
    tool = Tool.parse(
        {
            "name": "payments.refund_payment",
            "description": "Refund a payment fully or partly to the customer's card. Works for card payments only. "
            "Refunds take 5-10 days to arrive and the customer is notified by email automatically.",
            "not_for": "Cancelling subscriptions.",
            "scopes": ["billing:write"],
        }
    )
    text = tool.card().text()
    assert text == (
        "payments.refund_payment: Refund a payment fully or partly to the customer's card. "
        "Not for: Cancelling subscriptions. Needs: billing:write"
    )
    assert len(text.split()) < 40


def test_principal_scopes_and_wildcards() -> None:
    tool = Tool.parse({"name": "t", "description": "d", "scopes": ["billing:write"], "tenants": ["acme"]})
    assert Principal(tenant="acme", scopes=frozenset({"billing:write"})).can_use(tool)
    assert Principal(tenant="acme", scopes=frozenset({"billing:*"})).can_use(tool)
    assert Principal(tenant="acme", scopes=frozenset({"*"})).can_use(tool)
    assert not Principal(tenant="other", scopes=frozenset({"*"})).can_use(tool)
    assert not Principal(tenant="acme", scopes=frozenset({"billing:read"})).can_use(tool)
    assert not Principal(tenant="acme", scopes=frozenset({"billing:write"})).can_use(
        tool.model_copy(update={"active": False})
    )


def test_principal_name_rules() -> None:
    git_status = Tool.parse({"name": "git.git_status", "description": "d"})
    git_reset = Tool.parse({"name": "git.git_reset", "description": "d"})
    clock = Tool.parse({"name": "time.now", "description": "d"})
    only_git = Principal(allow_tools=frozenset({"git.*"}), deny_tools=frozenset({"git.git_reset"}))
    assert only_git.can_use(git_status) and not only_git.can_use(git_reset) and not only_git.can_use(clock)
    assert Principal(allow_tools=frozenset()).can_use(clock) is False  # an empty allow-list allows nothing
    assert Principal().can_use(clock)  # no rules: names do not restrict
    assert only_git.visibility_key != Principal().visibility_key
