"""Reconciliation: ADD, UPDATE or REINFORCE, decided inside the memory's own scope.

Candidates are the active records of the same type and scope that share the memory's exact key
(semantic label, procedure name, taxonomic term) or are among its nearest vectors. The rule:

* a candidate with the same key restating the memory (same text, or similarity at or above
  ``reinforce_at``) is REINFORCED; with the same key but saying something else, it is UPDATED
  (a new version supersedes it, both are kept);
* without a key match, the nearest candidate at or above ``reinforce_at`` is REINFORCED;
* a nearest candidate in the ambiguous band ``[ambiguous_from, reinforce_at)`` is put to the
  judge when one is configured (UPDATE, REINFORCE or ADD), and otherwise added: a memory is never
  overwritten on a guess;
* anything else is ADDED.

REINFORCE from a snapshot already in the record's evidence changes nothing: the same snapshot
counts once. An UPDATE from a snapshot older than the current fact's latest evidence is history
(:func:`older_than_current`): kept as a superseded version, the current fact untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from mempipe.schemas.audit import ReconcileAction


class ReconcileThresholds(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    reinforce_at: float = Field(default=0.92, ge=0, le=1, description="a restatement from here")
    ambiguous_from: float = Field(
        default=0.80, ge=0, le=1, description="the judge decides between here and reinforce_at"
    )
    candidates: int = Field(default=5, ge=1, description="nearest vectors considered")


@dataclass(frozen=True, slots=True)
class Candidate:
    memory_id: str
    key: str | None
    text: str
    similarity: float | None
    evidence: tuple[str, ...] = ()


class Verdict(StrEnum):
    """What a judge may answer for an ambiguous pair."""

    UPDATE = "UPDATE"
    REINFORCE = "REINFORCE"
    ADD = "ADD"


Judge = Callable[[str, Candidate], Verdict]


@dataclass(frozen=True, slots=True)
class Decision:
    action: ReconcileAction
    target: Candidate | None = None
    similarity: float | None = None
    no_op: bool = False


def normalize(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def decide(
    text: str,
    key: str | None,
    snapshot_id: str | None,
    candidates: Sequence[Candidate],
    thresholds: ReconcileThresholds,
    judge: Judge | None = None,
    *,
    one_memory: bool = False,
) -> Decision:
    """``one_memory``: the snapshot is one record of another memory system, which is one
    memory: the memory version it wrote before (its evidence starts with the record) is that
    memory, the same text again changing nothing, another text updating it (never a second
    memory). A memory the record only reinforced is another record's: it is reconciled
    against as any candidate is (a repeat of the reinforcement changing nothing)."""
    own = [c for c in candidates if one_memory and c.evidence[:1] == (snapshot_id,)]
    if own:
        target = own[0]
        if normalize(target.text) == normalize(text):
            return _reinforce(target, snapshot_id)
        return Decision(ReconcileAction.UPDATE, target, target.similarity)
    keyed = [c for c in candidates if key is not None and c.key == key]
    if keyed:
        target = max(keyed, key=lambda c: c.similarity or 0.0)
        if normalize(target.text) == normalize(text) or (
            target.similarity is not None and target.similarity >= thresholds.reinforce_at
        ):
            return _reinforce(target, snapshot_id)
        return Decision(ReconcileAction.UPDATE, target, target.similarity)
    scored = [c for c in candidates if c.similarity is not None]
    if not scored:
        return Decision(ReconcileAction.ADD)
    nearest = max(scored, key=lambda c: c.similarity or 0.0)
    similarity = nearest.similarity or 0.0
    if similarity >= thresholds.reinforce_at or normalize(nearest.text) == normalize(text):
        return _reinforce(nearest, snapshot_id)
    if similarity >= thresholds.ambiguous_from and judge is not None:
        verdict = judge(text, nearest)
        if verdict is Verdict.REINFORCE:
            return _reinforce(nearest, snapshot_id)
        if verdict is Verdict.UPDATE:
            return Decision(ReconcileAction.UPDATE, nearest, similarity)
    return Decision(ReconcileAction.ADD, None, similarity)


@dataclass(frozen=True, slots=True)
class Write:
    """What a decision writes. ``action`` is what the audit says; a REINFORCE grows
    ``reinforce``; an UPDATE supersedes ``supersede`` with a new version, unless the snapshot is
    older than the fact (``history``: the new version is stored superseded at once and audited
    as an ADD, the current fact untouched); ``nothing``: the snapshot counted already."""

    action: ReconcileAction
    reinforce: str | None = None
    supersede: str | None = None
    history: bool = False
    nothing: bool = False


def planned_write(
    decision: Decision, snapshot_id: str, times: Mapping[str, datetime] | None = None
) -> Write:
    """The writes of ``decision``; ``times`` (the snapshot's and the target's evidence's, read
    only for an UPDATE) tell history from a change of the current fact."""
    target = decision.target
    if decision.action is ReconcileAction.REINFORCE:
        if decision.no_op or target is None:
            return Write(ReconcileAction.REINFORCE, nothing=True)
        return Write(ReconcileAction.REINFORCE, reinforce=target.memory_id)
    if decision.action is ReconcileAction.UPDATE and target is not None:
        if older_than_current(snapshot_id, target, times or {}):
            return Write(ReconcileAction.ADD, history=True)
        return Write(ReconcileAction.UPDATE, supersede=target.memory_id)
    return Write(ReconcileAction.ADD)


def older_than_current(snapshot_id: str, target: Candidate, times: Mapping[str, datetime]) -> bool:
    """The snapshot happened before the latest evidence of the fact it would update: it is
    history (a late backfill of older conversations, a retried older extraction), and must
    never overwrite what is known now. Without times, time order cannot be told: not history."""
    at = times.get(snapshot_id)
    known = [times[s] for s in target.evidence if s in times]
    return at is not None and bool(known) and at < max(known)


def _reinforce(target: Candidate, snapshot_id: str | None) -> Decision:
    repeat = snapshot_id is not None and snapshot_id in target.evidence
    return Decision(ReconcileAction.REINFORCE, target, target.similarity, no_op=repeat)
