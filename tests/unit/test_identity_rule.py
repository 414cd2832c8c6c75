"""An identity the operator names is never silently replaced by one a record carries
(:mod:`mempipe.domain.identity`): a conflict is a reject naming both ids, unless the command
chose a policy; a default the operator did not name only fills what a record lacks."""

from __future__ import annotations

import pytest

from mempipe.domain.identity import settle_identity
from mempipe.schemas.identity import IdentityDefaults, IdentityPolicy

NAMED_JONAS = IdentityDefaults(org_id="acme", project_id="p", user_id="jonas", named={"user_id"})


def test_a_record_without_an_id_of_its_own_takes_the_named_one() -> None:
    fields: dict = {"content": "hi"}
    assert settle_identity(fields, NAMED_JONAS) is None
    assert (fields["org_id"], fields["project_id"], fields["user_id"]) == ("acme", "p", "jonas")


def test_a_record_whose_own_id_differs_from_a_named_one_is_a_conflict_naming_both() -> None:
    fields = {"user_id": "acct-jonas-0001"}
    reason = settle_identity(fields, NAMED_JONAS)
    assert reason is not None
    assert "'acct-jonas-0001'" in reason
    assert "--user-id named 'jonas'" in reason
    assert "--identity record" in reason
    assert "--identity command" in reason


def test_the_same_id_given_twice_is_no_conflict() -> None:
    fields = {"user_id": " jonas "}
    assert settle_identity(fields, NAMED_JONAS) is None


@pytest.mark.parametrize(
    ("policy", "stored"),
    [(IdentityPolicy.RECORD, "acct-jonas-0001"), (IdentityPolicy.COMMAND, "jonas")],
)
def test_a_chosen_policy_settles_the_conflict_its_way(policy, stored) -> None:
    given = NAMED_JONAS.model_copy(update={"policy": policy})
    fields = {"user_id": "acct-jonas-0001"}
    assert settle_identity(fields, given) is None
    assert fields["user_id"] == stored


def test_a_default_the_operator_did_not_name_only_fills_what_a_record_lacks() -> None:
    """The org from the environment or the configuration is not named on the command: a
    record's own org stands, without a reject."""
    fields = {"org_id": "their-org"}
    assert settle_identity(fields, NAMED_JONAS) is None
    assert (fields["org_id"], fields["user_id"]) == ("their-org", "jonas")


def test_what_a_run_records_of_the_identity_names_its_policy() -> None:
    recorded = NAMED_JONAS.model_copy(update={"policy": IdentityPolicy.RECORD}).recorded()
    assert recorded == {
        "org_id": "acme",
        "project_id": "p",
        "user_id": "jonas",
        "identity": "record",
    }
