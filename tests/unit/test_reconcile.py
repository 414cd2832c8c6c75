"""DESIGN rule: reconciliation picks one action - ADD, UPDATE or REINFORCE."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mempipe.domain.reconcile import (
    Candidate,
    Decision,
    ReconcileThresholds,
    Verdict,
    Write,
    decide,
    planned_write,
)
from mempipe.schemas.audit import ReconcileAction

T = ReconcileThresholds(reinforce_at=0.9, ambiguous_from=0.75)
MAY = datetime(2024, 5, 1, tzinfo=UTC)


def test_nothing_matching_is_an_add() -> None:
    assert decide("User likes tea.", "likes_tea", "s1", [], T).action is ReconcileAction.ADD


def test_the_same_key_saying_something_else_is_an_update_of_that_record() -> None:
    old = Candidate("m1", "home_airport", "User's home airport is JFK.", 0.7)
    decision = decide("User's home airport is LIS.", "home_airport", "s2", [old], T)
    assert (decision.action, decision.target) == (ReconcileAction.UPDATE, old)


def test_the_same_key_restating_is_a_reinforce() -> None:
    old = Candidate("m1", "home_airport", "User's home airport is LIS.", None)
    decision = decide("User's home airport is LIS", "home_airport", "s2", [old], T)
    assert (decision.action, decision.target, decision.no_op) == (
        ReconcileAction.REINFORCE,
        old,
        False,
    )


def test_a_near_duplicate_without_a_key_is_a_reinforce() -> None:
    near = Candidate("m1", None, "User met Priya at the office.", 0.95)
    decision = decide("User met Priya at the Lisbon office.", None, "s2", [near], T)
    assert decision.action is ReconcileAction.REINFORCE


def test_the_same_snapshot_reinforcing_twice_counts_once() -> None:
    taught = Candidate("m1", "home_airport", "User's home airport is LIS.", 1.0, ("s1",))
    decision = decide("User's home airport is LIS.", "home_airport", "s1", [taught], T)
    assert decision.action is ReconcileAction.REINFORCE
    assert decision.no_op


def test_the_ambiguous_band_is_added_without_a_judge_and_judged_with_one() -> None:
    maybe = Candidate("m1", None, "User prefers aisle seats.", 0.8)
    assert decide("User prefers window seats.", None, "s", [maybe], T).action is ReconcileAction.ADD
    judged = decide(
        "User prefers window seats.", None, "s", [maybe], T, lambda t, c: Verdict.UPDATE
    )
    assert (judged.action, judged.target) == (ReconcileAction.UPDATE, maybe)


def test_below_the_band_is_an_add_even_with_a_judge() -> None:
    far = Candidate("m1", None, "User likes trams.", 0.5)
    called = []
    decision = decide("User likes tea.", None, "s", [far], T, lambda t, c: called.append(1))
    assert decision.action is ReconcileAction.ADD
    assert called == []


def test_another_systems_record_is_one_memory_its_new_text_updating_it() -> None:
    """An import's source record (``mem0:<id>``) taught one memory: another text from it
    updates that memory however unlike it is; the same text again changes nothing."""
    own = Candidate("m1", None, "Lives in Porto.", 0.1, ("mem0:7",))
    other = Candidate("m2", None, "Owns a red bicycle.", 0.99, ("mem0:8",))
    changed = decide("Owns a red bicycle.", None, "mem0:7", [own, other], T, one_memory=True)
    assert (changed.action, changed.target) == (ReconcileAction.UPDATE, own)
    same = decide("lives in porto", None, "mem0:7", [own], T, one_memory=True)
    assert (same.action, same.no_op) == (ReconcileAction.REINFORCE, True)
    replayed = decide("Owns a red bicycle.", None, "mem0:7", [own, other], T)
    assert replayed.target == other, "a snapshot of a conversation teaches many memories"


def test_a_record_that_only_reinforced_a_memory_does_not_own_it() -> None:
    """``mem0:328`` restated ``mem0:298``'s memory (reinforcing it) in a run that was stopped;
    the rerun reads it again: the repeat changes nothing, as in a run never stopped, rather
    than updating the other record's memory with its text."""
    reinforced = Candidate("m1", None, "Fact about trip 2086.", 0.97, ("mem0:298", "mem0:328"))
    again = decide("Fact about trip 2296.", None, "mem0:328", [reinforced], T, one_memory=True)
    assert (again.action, again.target, again.no_op) == (
        ReconcileAction.REINFORCE,
        reinforced,
        True,
    )


def test_a_decision_s_writes_reinforce_update_and_repeat() -> None:
    """What each decision writes, as the audit names it: a repeat writes nothing, a
    REINFORCE grows the target, an UPDATE supersedes it, an ADD adds."""
    target = Candidate("m1", "home_airport", "Home airport is JFK.", 0.9, ("s-may",))
    repeat = Decision(ReconcileAction.REINFORCE, target, 0.99, no_op=True)
    assert planned_write(repeat, "s-may") == Write(ReconcileAction.REINFORCE, nothing=True)
    again = Decision(ReconcileAction.REINFORCE, target, 0.99)
    assert planned_write(again, "s-june") == Write(ReconcileAction.REINFORCE, reinforce="m1")
    changed = Decision(ReconcileAction.UPDATE, target, 0.7)
    times = {"s-may": MAY, "s-june": MAY + timedelta(days=30)}
    assert planned_write(changed, "s-june", times) == Write(ReconcileAction.UPDATE, supersede="m1")
    assert planned_write(Decision(ReconcileAction.ADD), "s-june") == Write(ReconcileAction.ADD)


def test_an_update_from_an_older_snapshot_is_history_added_and_the_current_fact_kept() -> None:
    """A late backfill of April's conversation says the airport was BOS; the fact, taught in
    May, is current: the April version is stored as history (superseded at once, audited ADD),
    nothing is superseded; without the times, order cannot be told and it is an UPDATE."""
    current = Candidate("m1", "home_airport", "Home airport is JFK.", 0.7, ("s-may",))
    older = Decision(ReconcileAction.UPDATE, current, 0.7)
    times = {"s-april": MAY - timedelta(days=30), "s-may": MAY}
    assert planned_write(older, "s-april", times) == Write(ReconcileAction.ADD, history=True)
    assert planned_write(older, "s-april") == Write(ReconcileAction.UPDATE, supersede="m1")
