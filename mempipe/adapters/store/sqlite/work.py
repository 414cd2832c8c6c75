"""The SQLite store's work-queue role: which (snapshot, handler) extractions are runnable, what a
snapshot holds, and each extraction's state."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from mempipe.adapters.store.sqlite import sql
from mempipe.adapters.store.sqlite.base import SqliteParts, now_text
from mempipe.errors import StoreError
from mempipe.schemas.snapshot import ExtractionState
from mempipe.schemas.transcript import SnapshotContent, TurnLine
from mempipe.schemas.work import Stale, WorkItem, WorkQuery

RUNNABLE = "e.status IN ('pending', 'failed_retryable')"


def _states(force: bool, stale: Stale | None) -> tuple[str, list[str]]:
    """Which states are work: every one (``force``), the runnable ones, and with ``stale`` the
    done ones that ran with another extraction than the handler's current one."""
    if force:
        return "", []
    if not stale:
        return f"AND {RUNNABLE}", []
    differs = " OR ".join(
        "(e.handler = ? AND (coalesce(e.extractor, '') != ? "
        "OR coalesce(e.prompt_version, '') != ?))"
        for _ in stale
    )
    versions = [
        value
        for handler, version in stale.items()
        for value in (handler, version.extractor, version.prompt_version or "")
    ]
    return f"AND ({RUNNABLE} OR (e.status = 'done' AND ({differs})))", versions


class SqliteWorkQueue(SqliteParts):
    """Snapshots as extraction work."""

    def extraction_work(self, query: WorkQuery) -> list[WorkItem]:
        if not query.handlers:
            return []
        where, values = sql.selection_where(query.selection)
        now = now_text()
        with self._writing():
            for handler in query.handlers:
                self._conn.execute(
                    "INSERT INTO snapshot_extractions (snapshot_id, handler, status, "
                    f"attempts, updated_at) SELECT s.id, ?, 'pending', 0, ? FROM snapshots s "
                    f"WHERE {where} ON CONFLICT DO NOTHING",
                    (handler, now, *values),
                )
        states, versions = _states(query.force, query.stale)
        marks = ", ".join("?" for _ in query.handlers)
        rows = self._rows(
            "SELECT s.id, e.handler, e.attempts, s.org_id, s.project_id, s.user_id "
            "FROM snapshots s JOIN snapshot_extractions e "
            f"ON e.snapshot_id = s.id WHERE {where} AND e.handler IN ({marks}) {states} "
            "AND NOT EXISTS (SELECT 1 FROM forgotten_evidence f WHERE f.snapshot_id = s.id "
            "AND f.handler IN (e.handler, '*')) "
            "ORDER BY coalesce(s.started_at, s.created_at), s.session_id, s.first_turn_seq, "
            "e.handler",
            (*values, *query.handlers, *versions),
        )
        return [
            WorkItem(
                snapshot_id=r[0],
                handler=r[1],
                attempts=r[2],
                org_id=r[3],
                project_id=r[4],
                user_id=r[5],
            )
            for r in rows
        ]

    def snapshot_content(self, snapshot_id: str) -> SnapshotContent:
        head = self._rows(
            "SELECT org_id, project_id, user_id, agent_id, session_id, first_turn_seq, "
            "last_turn_seq FROM snapshots WHERE id = ?",
            (snapshot_id,),
        )
        if not head:
            raise StoreError(f"no snapshot {snapshot_id!r}")
        org, project, user, agent, session, first, last = head[0]
        turns = self._rows(
            "SELECT role, content, created_at FROM turns WHERE org_id = ? AND project_id = ? "
            "AND coalesce(user_id, '') = coalesce(?, '') AND session_id = ? "
            "AND turn_seq BETWEEN ? AND ? ORDER BY turn_seq",
            (org, project, user, session, first, last),
        )
        return SnapshotContent(
            snapshot_id=snapshot_id,
            org_id=org,
            project_id=project,
            user_id=user,
            agent_id=agent,
            session_id=session,
            turns=[TurnLine(role=r, content=c, created_at=sql.parse_iso(t)) for r, c, t in turns],
        )

    def snapshot_times(self, snapshot_ids: Sequence[str]) -> dict[str, datetime]:
        if not snapshot_ids:
            return {}
        marks = ", ".join("?" for _ in snapshot_ids)
        return {
            snapshot_id: sql.parse_iso(at)
            for snapshot_id, at in self._rows(
                f"SELECT id, coalesce(started_at, created_at) FROM snapshots WHERE id IN ({marks})",
                list(snapshot_ids),
            )
            if at is not None
        }

    def rule_summarized(self, snapshot_ids: Sequence[str]) -> list[str]:
        """Those of the snapshots whose summary is still the deterministic one."""
        marks = ", ".join("?" for _ in snapshot_ids)
        return [
            row[0]
            for row in self._rows(
                f"SELECT id FROM snapshots WHERE id IN ({marks}) AND summary_source = 'rules'",
                list(snapshot_ids),
            )
        ]

    def set_snapshot_summary(self, snapshot_id: str, summary: str, source: str) -> None:
        with self._writing():
            self._conn.execute(
                "UPDATE snapshots SET summary = ?, summary_source = ? WHERE id = ?",
                (summary, source, snapshot_id),
            )

    def set_extraction_state(self, snapshot_id: str, state: ExtractionState) -> None:
        with self._writing():
            self._conn.execute(
                "UPDATE snapshot_extractions SET status = ?, attempts = ?, last_error = ?, "
                "extractor = ?, prompt_version = ?, updated_at = ?, claimed_by = NULL, "
                "claimed_until = NULL WHERE snapshot_id = ? AND handler = ?",
                (
                    state.status.value,
                    state.attempts,
                    state.last_error,
                    state.extractor,
                    state.prompt_version,
                    now_text(),
                    snapshot_id,
                    state.handler,
                ),
            )
