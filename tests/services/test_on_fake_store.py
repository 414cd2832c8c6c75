"""Promotion, replay reconciliation and audit on the in-memory fake store: the services' logic
without SQL, and failure paths a real store cannot be made to take at an exact point.

The first test runs the same scenario on the fake and on real SQLite and compares them, so the
fake cannot drift into a store that behaves otherwise.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.llm.offline import OfflineExtractor
from mempipe.adapters.store import open_store
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.failures import ContentError, FailureKind, RetryPolicy
from mempipe.errors import StoreError
from mempipe.schemas.audit import AuditSelection
from mempipe.schemas.config import PromotionLimits
from mempipe.schemas.extraction import Extracted
from mempipe.schemas.failure import FailureClass
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.snapshot import ExtractionStatus
from mempipe.schemas.transcript import SnapshotContent
from mempipe.schemas.work import WorkQuery
from mempipe.services.promote import promote_sessions
from mempipe.services.replay.extract import ExtractionSummary, ReplayContext, replay_batch
from mempipe.services.report.audit import scan_audit, write_audit
from tests.fakes.memory_store import InMemoryStore
from tests.helpers import ingest

SAMPLE = Path(__file__).parents[2] / "examples" / "sample-archive"
HANDLERS = ["semantic", "episodic", "procedural", "taxonomic"]
QUICK = RetryPolicy(max_attempts=3, network_base=0.0, network_cap=0.0)


def loaded(store, tmp_path: Path):
    for path in sorted(SAMPLE.iterdir()):
        ingest(
            store,
            path,
            IdentityDefaults(org_id="acme", project_id="travel", user_id="maya"),
            tmp_path / "rejects.jsonl",
            run_id="backfill",
        )
    promote_sessions(UnitOfWork(store), PromotionLimits(), HANDLERS, run_id="backfill")
    return store


def context(run_id: str = "run") -> ReplayContext:
    return ReplayContext(
        run_id=run_id,
        extractor=OfflineExtractor(),
        embedder=HashingEmbedder(64),
        retry=QUICK,
        sleep=lambda _: None,
    )


def replay(store, run_id: str = "run") -> list[ExtractionSummary]:
    work = store.extraction_work(WorkQuery(handlers=HANDLERS))
    return replay_batch(UnitOfWork(store), work, context(run_id))


def outcome(store) -> Counter[tuple[str, str, int, str]]:
    """What reconciliation did, as a multiset independent of ids and times."""
    return Counter((r.action.value, r.memory_type, r.version, r.text) for r in store.audit_rows())


def test_the_fake_reconciles_exactly_as_sqlite_does(tmp_path: Path) -> None:
    fake = loaded(InMemoryStore(), tmp_path)
    real = loaded(open_store(f"sqlite:///{tmp_path / 'real.db'}", migrate=True), tmp_path)
    try:
        assert fake.count_unpromoted_turns() == real.count_unpromoted_turns() == 0
        fake_work = fake.extraction_work(WorkQuery(handlers=HANDLERS))
        real_work = real.extraction_work(WorkQuery(handlers=HANDLERS))
        assert fake_work == real_work
        assert [r.status for r in replay(fake)] == [r.status for r in replay(real)]
        assert outcome(fake) == outcome(real)
        assert sum(outcome(fake).values()) > 0
        assert {a for a, *_ in outcome(fake)} == {"ADD", "UPDATE", "REINFORCE"}
    finally:
        real.close()


def test_promotion_twice_cuts_each_session_once(tmp_path: Path) -> None:
    store = loaded(InMemoryStore(), tmp_path)
    snapshots = len(store.data.snapshots)
    again = promote_sessions(UnitOfWork(store), PromotionLimits(), HANDLERS, run_id="again")
    assert snapshots > 0
    assert (again.snapshots_created, len(store.data.snapshots)) == (0, snapshots)


def test_a_failed_snapshot_write_is_raised_never_an_empty_promotion(tmp_path: Path) -> None:
    store = InMemoryStore()
    store.fail("add_snapshots", transient=False)
    with pytest.raises(StoreError, match="add_snapshots: refused"):
        loaded(store, tmp_path)
    assert store.count_unpromoted_turns() > 0, "the turns wait for the next promotion"


def test_a_transient_write_failure_mid_replay_is_retried_and_audited_once(
    tmp_path: Path,
) -> None:
    clean = loaded(InMemoryStore(), tmp_path)
    replay(clean)
    store = loaded(InMemoryStore(), tmp_path)
    store.fail("add_memory", nth=3, transient=True)
    store.fail("add_audit", nth=5, transient=True)

    results = replay(store)

    assert all(r.status is ExtractionStatus.DONE for r in results)
    assert store.calls["write_transaction"] == 1 + 2, "the batch's transaction, retried twice"
    assert outcome(store) == outcome(clean), "each change audited once, as without faults"
    assert store.data.failures == []


def test_a_batch_of_extractions_is_written_in_one_transaction(tmp_path: Path) -> None:
    store = loaded(InMemoryStore(), tmp_path)

    results = replay(store)

    assert len(results) > 1
    assert all(r.status is ExtractionStatus.DONE for r in results)
    assert store.calls["write_transaction"] == 1


class Refusing(OfflineExtractor):
    """An extractor whose every answer is a refusal."""

    def extract(self, snapshot: SnapshotContent, memory_type: MemoryType) -> list[Extracted]:
        raise ContentError(FailureKind.REFUSAL, "refused (injected)")


def test_a_batch_whose_every_extraction_failed_takes_no_write_lock(tmp_path: Path) -> None:
    store = loaded(InMemoryStore(), tmp_path)
    work = store.extraction_work(WorkQuery(handlers=HANDLERS))

    results = replay_batch(
        UnitOfWork(store), work, context().model_copy(update={"extractor": Refusing()})
    )

    assert len(results) == len(work) > 1
    assert {r.status for r in results} == {ExtractionStatus.FAILED_CONTENT}
    assert store.calls["write_transaction"] == 0


def test_a_terminal_write_failure_is_recorded_never_an_empty_success(tmp_path: Path) -> None:
    store = loaded(InMemoryStore(), tmp_path)
    # refused twice: in the batch's transaction, then in the first extraction's own
    store.fail("add_memory", nth=1, transient=False, times=2)

    results = replay(store)

    failed = [r for r in results if r.status is not ExtractionStatus.DONE]
    assert len(failed) == 1, "the batch written again one extraction at a time: one refused"
    assert len(results) - 1 == sum(r.status is ExtractionStatus.DONE for r in results)
    (summary,) = failed
    assert summary.status is ExtractionStatus.FAILED_CONTENT
    assert summary.failure_class is FailureClass.CONTENT
    assert "add_memory: refused" in (summary.error or "")
    assert store.state(summary.snapshot_id, summary.handler) is ExtractionStatus.FAILED_CONTENT
    (failure,) = store.data.failures
    assert (failure.step, failure.snapshot_id) == (f"write:{summary.handler}", summary.snapshot_id)
    assert all(
        r.snapshot_id != summary.snapshot_id or r.memory_type != summary.handler
        for r in store.audit_rows()
    ), "the failed write left nothing behind"


def test_a_busy_store_that_outlasts_the_retries_leaves_the_extractions_retryable(
    tmp_path: Path,
) -> None:
    clean = loaded(InMemoryStore(), tmp_path)
    replay(clean)
    store = loaded(InMemoryStore(), tmp_path)
    store.fail("add_audit", transient=True, times=10_000)  # busy through every retry

    first = replay(store)

    assert len(first) > 1
    assert {r.status for r in first} == {ExtractionStatus.FAILED_RETRYABLE}
    assert {r.attempts for r in first} == {QUICK.max_attempts}, "each its own retries"
    assert len(store.data.failures) == len(first)
    assert {f.failure_class for f in store.data.failures} == {FailureClass.ENVIRONMENTAL}
    assert list(store.audit_rows()) == [], "the failed writes left nothing behind"

    store.faults.clear()  # the store is free again
    second = replay(store, run_id="again")

    assert [(r.snapshot_id, r.handler) for r in second] == [
        (r.snapshot_id, r.handler) for r in first
    ]
    assert {r.status for r in second} == {ExtractionStatus.DONE}
    assert outcome(store) == outcome(clean), "each change audited once, as without faults"


def test_the_audit_export_writes_every_row_once(tmp_path: Path) -> None:
    store = loaded(InMemoryStore(), tmp_path)
    replay(store)
    rows = list(store.audit_rows(AuditSelection(run_id="run")))

    files = write_audit(store.audit_rows(AuditSelection(run_id="run")), tmp_path / "audit", "fake")
    again = write_audit(store.audit_rows(AuditSelection(run_id="run")), tmp_path / "audit", "fake")

    frame = scan_audit(tmp_path / "audit").collect()
    assert files == again
    assert frame.height == len(rows) > 0
    assert frame.select(pl.col("memory_id").n_unique()).item() == len({r.memory_id for r in rows})
