"""The retention rules, pure: ages as written, a rule's two limits, pins, versions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from mempipe.domain.retention import (
    Held,
    as_of_problem,
    expiry_of,
    owner_expired,
    versions_expired,
)
from mempipe.schemas.retention import RetentionPolicy

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def policy(**rules: object) -> RetentionPolicy:
    return RetentionPolicy.model_validate(rules)


def days_ago(n: int) -> datetime:
    return NOW - timedelta(days=n)


@pytest.mark.parametrize(("written", "age"), [("90d", 90), ("12w", 84), ("36h", 1.5)])
def test_an_age_is_read_with_its_unit_and_written_back_as_given(written, age) -> None:
    rule = policy(turns={"max_age": written}).turns
    assert rule is not None
    assert rule.max_age == timedelta(days=age)
    assert rule.model_dump(mode="json")["max_age"] == written.replace("12w", "84d")


@pytest.mark.parametrize(
    "rules",
    [
        {"turns": {"max_age": "90"}},
        {"turns": {"max_age": "-3d"}},
        {"turns": {}},
        {"semantic": {"max_per_user": 0}},
        {"keep_versions": -1},
        {"custom": {"max_age": "9d"}},
    ],
)
def test_a_policy_that_cannot_be_read_is_refused(rules) -> None:
    with pytest.raises(ValidationError):
        policy(**rules)


def test_past_the_cutoff_is_aged_and_past_the_cap_the_oldest_of_the_rest_go() -> None:
    expiry = expiry_of(policy(turns={"max_age": "30d", "max_per_user": 2}), NOW)
    records = [
        Held("new", days_ago(1)),
        Held("mid", days_ago(10)),
        Held("third", days_ago(20)),
        Held("unknown", None),
        Held("old", days_ago(40)),
    ]
    assert owner_expired(records, "turns", expiry) == {
        "third": "turns.max_per_user",
        "unknown": "turns.max_per_user",
        "old": "turns.max_age",
    }


def test_a_time_unknown_is_never_aged_and_a_pinned_record_takes_no_place() -> None:
    expiry = expiry_of(policy(semantic={"max_age": "30d", "max_per_user": 1}), NOW)
    records = [Held("pinned", days_ago(99), counted=False), Held("kept", None)]
    assert owner_expired(records, "semantic", expiry) == {}


def test_versions_go_with_their_memory_and_past_keep_versions() -> None:
    chains = {"gone": ["g2", "g1"], "kept": ["k3", "k2", "k1"], "lone": []}
    assert versions_expired(chains, {"gone": "semantic.max_age"}, keep=1) == {
        "g2": "semantic.max_age",
        "g1": "semantic.max_age",
        "k2": "keep_versions",
        "k1": "keep_versions",
    }
    assert versions_expired(chains, {}, keep=None) == {}


def test_a_policy_forgets_where_it_has_rules_and_keep_versions_reaches_every_type() -> None:
    assert policy(turns={"max_age": "9d"}).ruled == ["turns"]
    assert policy(keep_versions=2).ruled == ["semantic", "episodic", "procedural", "taxonomic"]
    assert not policy().forgets


def test_a_time_to_come_is_refused_and_a_past_one_is_not() -> None:
    assert as_of_problem(NOW + timedelta(seconds=1), NOW) is not None
    assert as_of_problem(NOW - timedelta(days=1), NOW) is None
