"""The SQLite store's leases: heartbeats, and named locks held by live runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from mempipe.adapters.store.sqlite import sql
from mempipe.adapters.store.sqlite.base import SqliteParts

ACQUIRE = (
    "INSERT INTO leases (name, run_id, until, acquired_at) VALUES (?1, ?2, ?3, ?4) "
    "ON CONFLICT (name) DO UPDATE SET run_id = excluded.run_id, until = excluded.until, "
    "acquired_at = CASE WHEN leases.run_id = excluded.run_id THEN leases.acquired_at "
    "ELSE excluded.acquired_at END "
    "WHERE leases.run_id = excluded.run_id OR leases.until <= ?4 OR NOT EXISTS "
    "(SELECT 1 FROM runs r WHERE r.run_id = leases.run_id AND r.status = 'running') "
    "RETURNING run_id"
)
"""Take the lease unless another *running* run holds it and it has not run out."""


class SqliteLeases(SqliteParts):
    """Named locks that end with their run."""

    def acquire_lease(self, name: str, run_id: str, lease: timedelta) -> str | None:
        now = datetime.now(UTC)
        with self._writing():
            taken = self._conn.execute(
                ACQUIRE, (name, run_id, sql.iso(now + lease), sql.iso(now))
            ).fetchall()
            if taken:
                return None
            holder = self._conn.execute(
                "SELECT run_id FROM leases WHERE name = ?", (name,)
            ).fetchall()
        return holder[0][0] if holder else None

    def release_leases(self, run_id: str, names: Sequence[str] | None = None) -> None:
        with self._writing():
            if names is None:
                self._conn.execute("DELETE FROM leases WHERE run_id = ?", (run_id,))
            else:
                self._conn.executemany(
                    "DELETE FROM leases WHERE run_id = ? AND name = ?",
                    [(run_id, name) for name in names],
                )

    def heartbeat(self, run_id: str, lease: timedelta) -> None:
        now = datetime.now(UTC)
        with self._writing():
            self._conn.execute(
                "UPDATE runs SET heartbeat_at = ? WHERE run_id = ? AND status = 'running'",
                (sql.iso(now), run_id),
            )
            self._conn.execute(
                "UPDATE leases SET until = ? WHERE run_id = ?",
                (sql.iso(now + lease), run_id),
            )

    def lease_holders(self) -> dict[str, str]:
        """Every lease by name, with the run that holds it."""
        return dict(self._rows("SELECT name, run_id FROM leases ORDER BY name"))
