"""An in-memory fake of the turns, work-queue, memories and audit-log roles, with fault knobs.

Service tests run on it when they test the services' logic, not SQL: it is fast, and it fails on
command (the n-th call of a method, transiently or terminally), which a real store can rarely be
made to do at an exact point. Transactions are real in the sense that matters: a write
transaction whose body raises leaves nothing behind. Scenarios that also run on SQLite
(``tests/unit/test_services_on_fake_store.py``) keep the fake honest.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mempipe.adapters.store.base import OneBatchAtATime
from mempipe.adapters.store.rejects import conflict_reject
from mempipe.domain.promotion import TurnStamp
from mempipe.domain.reconcile import Candidate
from mempipe.errors import MempipeError, StoreError, TransientError
from mempipe.schemas.audit import EVERY_ROW, AuditRow, AuditSelection, AuditTime
from mempipe.schemas.failure import Failure
from mempipe.schemas.memory import KEY_FIELDS, MemoryRecord, MemoryStatus
from mempipe.schemas.reject import Reject
from mempipe.schemas.search import CandidateQuery
from mempipe.schemas.selection import SnapshotSelection
from mempipe.schemas.snapshot import ExtractionState, ExtractionStatus, Snapshot
from mempipe.schemas.summaries import TurnWriteResult
from mempipe.schemas.transcript import SnapshotContent, TurnLine
from mempipe.schemas.turn import Turn
from mempipe.schemas.work import WorkItem, WorkQuery

RUNNABLE = (ExtractionStatus.PENDING, ExtractionStatus.FAILED_RETRYABLE)


class FakeBusyError(TransientError):
    """What a busy store says: worth another try."""


@dataclass
class Fault:
    method: str
    nth: int
    error: MempipeError
    times: int = 1


@dataclass
class _Data:
    turns: dict[tuple[str, str, str, str, int], tuple[Turn, str | None]] = field(
        default_factory=dict
    )
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    summaries: dict[str, tuple[str, str]] = field(default_factory=dict)
    states: dict[tuple[str, str], ExtractionState] = field(default_factory=dict)
    memories: dict[str, dict[str, MemoryRecord]] = field(default_factory=dict)
    vectors: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    models: dict[str, tuple[str, int]] = field(default_factory=dict)
    audit: list[AuditRow] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


def _turn_key(turn: Turn | TurnStamp) -> tuple[str, str, str, str, int]:
    return (turn.org_id, turn.project_id, turn.user_id or "", turn.session_id, turn.turn_seq)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norms if norms else 0.0


class InMemoryStore(OneBatchAtATime):
    """Turns, WorkQueue, Memories and AuditLog, held in dicts."""

    url = "memory://fake"

    def __init__(self) -> None:
        self.data = _Data()
        self.calls: Counter[str] = Counter()
        self.faults: list[Fault] = []
        self.erased: dict[tuple[str, str, str], datetime] = {}
        """Owners fenced by an erase, and when: set by a test to play an erase meanwhile."""

    def erased_since(
        self, org_id: str, project_id: str, user_id: str | None, epoch: datetime
    ) -> bool:
        at = self.erased.get((org_id, project_id, user_id or ""))
        return at is not None and at > epoch

    def close(self) -> None:
        """Nothing to let go: the data lives as long as the object."""

    # -- fault knobs ------------------------------------------------------------------------

    def fail(self, method: str, *, nth: int = 1, transient: bool = True, times: int = 1) -> None:
        """The ``nth`` call of ``method`` (and the ``times - 1`` after it) raises: a busy
        store (transient) or a refusal no retry changes (terminal)."""
        error: MempipeError = (
            FakeBusyError(f"{method}: store busy (injected)")
            if transient
            else StoreError(f"{method}: refused (injected)")
        )
        self.faults.append(Fault(method, nth, error, times))

    def _call(self, method: str) -> None:
        self.calls[method] += 1
        count = self.calls[method]
        for fault in self.faults:
            if fault.method == method and fault.nth <= count < fault.nth + fault.times:
                raise fault.error

    @contextmanager
    def write_transaction(self) -> Iterator[None]:
        self._call("write_transaction")
        before = copy.deepcopy(self.data)
        try:
            yield
        except BaseException:
            self.data = before
            raise

    @contextmanager
    def rehearsal(self) -> Iterator[None]:
        before = copy.deepcopy(self.data)
        try:
            yield
        finally:
            self.data = before

    # -- turns ------------------------------------------------------------------------------

    def add_turns(self, turns: Sequence[Turn], run_id: str | None) -> TurnWriteResult:
        self._call("add_turns")
        inserted = duplicates = 0
        conflicts: list[Reject] = []
        for turn in turns:
            key = _turn_key(turn)
            stored = self.data.turns.get(key)
            if stored is None:
                self.data.turns[key] = (turn, None)
                inserted += 1
            elif (stored[0].role, stored[0].content) == (turn.role, turn.content):
                duplicates += 1
            else:
                where = stored[0].source
                conflicts.append(conflict_reject(turn, where.path, where.line, where.index))
        return TurnWriteResult(inserted=inserted, duplicates=duplicates, conflicts=conflicts)

    def count_unpromoted_turns(self) -> int:
        return sum(snapshot is None for _, snapshot in self.data.turns.values())

    def iter_unpromoted_turns(self, page_size: int = 5000) -> Iterator[TurnStamp]:
        for key in sorted(k for k, (_, s) in self.data.turns.items() if s is None):
            t = self.data.turns[key][0]
            yield TurnStamp(
                t.org_id,
                t.project_id,
                t.session_id,
                t.turn_seq,
                t.created_at,
                t.role.value,
                t.content,
                t.user_id,
                t.agent_id,
            )

    def add_snapshots(self, snapshots: Sequence[Snapshot]) -> set[str]:
        self._call("add_snapshots")
        created = set()
        for s in snapshots:
            if s.snapshot_id in self.data.snapshots:
                continue
            created.add(s.snapshot_id)
            self.data.snapshots[s.snapshot_id] = s
            for e in s.extraction:
                self.data.states[(s.snapshot_id, e.handler)] = e
            for seq in range(s.first_turn_seq, s.last_turn_seq + 1):
                key = (s.org_id, s.project_id, s.user_id or "", s.session_id, seq)
                if key in self.data.turns:
                    self.data.turns[key] = (self.data.turns[key][0], s.snapshot_id)
        return created

    # -- work queue -------------------------------------------------------------------------

    def _selected(self, selection: SnapshotSelection) -> list[Snapshot]:
        chosen = []
        for s in self.data.snapshots.values():
            fields = ("org_id", "project_id", "user_id", "session_id")
            if any(getattr(selection, f) not in (None, getattr(s, f)) for f in fields):
                continue
            if selection.snapshot_ids and s.snapshot_id not in selection.snapshot_ids:
                continue
            chosen.append(s)
        return sorted(chosen, key=lambda s: (self._time(s), s.session_id, s.first_turn_seq))

    @staticmethod
    def _time(snapshot: Snapshot) -> datetime:
        return snapshot.started_at or datetime.min.replace(tzinfo=UTC)

    def extraction_work(self, query: WorkQuery) -> list[WorkItem]:
        items = []
        for s in self._selected(query.selection):
            for handler in sorted(query.handlers):
                state = self.data.states.setdefault(
                    (s.snapshot_id, handler), ExtractionState(handler=handler)
                )
                current = (query.stale or {}).get(handler)
                again = current is not None and current.stale(
                    state.status, state.extractor, state.prompt_version
                )
                if query.force or again or state.status in RUNNABLE:
                    items.append(
                        WorkItem(
                            snapshot_id=s.snapshot_id,
                            handler=handler,
                            attempts=state.attempts,
                            org_id=s.org_id,
                            project_id=s.project_id,
                            user_id=s.user_id,
                        )
                    )
        return items

    def snapshot_content(self, snapshot_id: str) -> SnapshotContent:
        s = self.data.snapshots.get(snapshot_id)
        if s is None:
            raise StoreError(f"no snapshot {snapshot_id!r}")
        lines = [
            TurnLine(role=t.role.value, content=t.content, created_at=t.created_at)
            for key, (t, _) in sorted(self.data.turns.items())
            if key[:4] == (s.org_id, s.project_id, s.user_id or "", s.session_id)
            and s.first_turn_seq <= key[4] <= s.last_turn_seq
        ]
        identity = s.model_dump(
            include={"org_id", "project_id", "user_id", "agent_id", "session_id"}
        )
        return SnapshotContent(snapshot_id=snapshot_id, turns=lines, **identity)

    def snapshot_times(self, snapshot_ids: Sequence[str]) -> dict[str, datetime]:
        found = (self.data.snapshots.get(i) for i in snapshot_ids)
        return {s.snapshot_id: s.started_at for s in found if s is not None and s.started_at}

    def rule_summarized(self, snapshot_ids: Sequence[str]) -> list[str]:
        return [
            i for i in snapshot_ids if i in self.data.snapshots and i not in self.data.summaries
        ]

    def set_snapshot_summary(self, snapshot_id: str, summary: str, source: str) -> None:
        self._call("set_snapshot_summary")
        self.data.summaries[snapshot_id] = (summary, source)

    def set_extraction_state(self, snapshot_id: str, state: ExtractionState) -> None:
        self._call("set_extraction_state")
        self.data.states[(snapshot_id, state.handler)] = state

    # -- memories ---------------------------------------------------------------------------

    def ensure_vector_table(self, memory_type: str, model_id: str, dimensions: int) -> str:
        serving = self.data.models.setdefault(memory_type, (model_id, dimensions))
        if serving != (model_id, dimensions):
            raise StoreError(f"{memory_type} is indexed with {serving[0]}; refusing {model_id}")
        return f"{memory_type}:{model_id}"

    def _records(self, memory_type: str) -> dict[str, MemoryRecord]:
        return self.data.memories.setdefault(memory_type, {})

    def memory_candidates(self, asked: CandidateQuery) -> list[Candidate]:
        key_field = KEY_FIELDS.get(asked.memory_type)
        in_scope = [
            r
            for r in self._records(asked.memory_type).values()
            if r.status is MemoryStatus.ACTIVE
            and (r.org_id, r.project_id, r.user_id, r.agent_id, r.visibility)
            == (
                asked.scope.org_id,
                asked.scope.project_id,
                asked.scope.user_id,
                asked.scope.agent_id,
                asked.scope.visibility,
            )
        ]
        found: dict[str, Candidate] = {}
        for r in in_scope:
            own_key = getattr(r, key_field) if key_field else None
            if (asked.key is not None and own_key == asked.key) or (
                asked.taught_by and asked.taught_by in r.evidence
            ):
                found[r.id] = Candidate(r.id, own_key, r.text, None, tuple(r.evidence))
        if asked.near is not None:
            scored = [
                (_cosine(asked.near.vector, self.data.vectors[(r.id, asked.near.model_id)]), r)
                for r in in_scope
                if (r.id, asked.near.model_id) in self.data.vectors
            ]
            for similarity, r in sorted(scored, key=lambda p: -p[0])[: asked.k]:
                own_key = getattr(r, key_field) if key_field else None
                found[r.id] = Candidate(r.id, own_key, r.text, similarity, tuple(r.evidence))
        return list(found.values())

    def add_memory(
        self, memory_type: str, record: MemoryRecord, vector: list[float] | None
    ) -> bool:
        self._call("add_memory")
        records = self._records(memory_type)
        if record.id in records:
            raise StoreError(f"{memory_type} {record.id} exists")
        records[record.id] = record
        if vector is not None and record.embedding_model_id is not None:
            self.data.vectors[(record.id, record.embedding_model_id)] = list(vector)
        return True

    def supersede_memory(self, memory_type: str, memory_id: str) -> int:
        self._call("supersede_memory")
        old = self._records(memory_type)[memory_id]
        self._records(memory_type)[memory_id] = old.model_copy(
            update={"status": MemoryStatus.SUPERSEDED}
        )
        return old.version

    def reinforce_memory(self, memory_type: str, memory_id: str, snapshot_id: str) -> int:
        self._call("reinforce_memory")
        old = self._records(memory_type)[memory_id]
        if snapshot_id not in old.evidence:
            self._records(memory_type)[memory_id] = old.model_copy(
                update={
                    "reinforcement_count": old.reinforcement_count + 1,
                    "evidence": [*old.evidence, snapshot_id],
                }
            )
        return old.version

    def get_memory(self, memory_type: str, memory_id: str) -> dict[str, Any] | None:
        record = self._records(memory_type).get(memory_id)
        return None if record is None else record.model_dump(mode="json")

    # -- audit log --------------------------------------------------------------------------

    def add_audit(self, rows: Sequence[AuditRow]) -> None:
        self._call("add_audit")
        self.data.audit.extend(rows)

    def audit_rows(self, selection: AuditSelection = EVERY_ROW) -> Iterator[AuditRow]:
        run_id, since, until = selection.run_id, selection.since, selection.until
        for row in self.data.audit:
            when = row.day if selection.by is AuditTime.APPLIED else row.observed_at
            if when is None and (since or until):
                continue
            day = when.date().isoformat() if isinstance(when, datetime) else str(when)
            if run_id and row.run_id != run_id:
                continue
            if (since and day < since) or (until and day > until):
                continue
            yield row

    def add_failure(self, failure: Failure) -> None:
        self._call("add_failure")
        self.data.failures.append(failure)

    def failure_counts(
        self, run_id: str | None = None, since: str | None = None, until: str | None = None
    ) -> dict[str, int]:
        counts = {"environmental": 0, "content": 0}
        for f in self.data.failures:
            day = f.at.date().isoformat()
            if (
                (run_id and f.run_id != run_id)
                or (since and day < since)
                or (until and day > until)
            ):
                continue
            counts[f.failure_class.value] += 1
        return counts

    # -- what a test asks of it -------------------------------------------------------------

    def state(self, snapshot_id: str, handler: str) -> ExtractionStatus:
        return self.data.states[(snapshot_id, handler)].status
