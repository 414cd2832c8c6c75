"""The SQLite store's provider batches."""

from __future__ import annotations

from mempipe.adapters.store.sqlite import sql
from mempipe.adapters.store.sqlite.base import SqliteParts
from mempipe.schemas.batch import OPEN, ProviderBatch


class SqliteProviderBatches(SqliteParts):
    def record_batch(self, batch: ProviderBatch) -> None:
        with self._writing():
            self._conn.execute(
                "INSERT INTO provider_batches (key, run_id, job, scope, status, created_at, "
                "record) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                "status = excluded.status, record = excluded.record",
                (
                    batch.key,
                    batch.run_id,
                    batch.job,
                    batch.scope,
                    batch.status.value,
                    sql.iso(batch.created_at),
                    batch.model_dump_json(),
                ),
            )

    def open_batches(self, job: str, scope: str) -> list[ProviderBatch]:
        marks = ", ".join("?" for _ in OPEN)
        return self._batches(
            f"WHERE job = ? AND scope = ? AND status IN ({marks})", (job, scope, *OPEN)
        )

    def run_batches(self, run_id: str) -> list[ProviderBatch]:
        return self._batches("WHERE run_id = ?", (run_id,))

    def _batches(self, where: str, parameters: tuple[str, ...]) -> list[ProviderBatch]:
        return [
            ProviderBatch.model_validate_json(record)
            for (record,) in self._rows(
                f"SELECT record FROM provider_batches {where} ORDER BY created_at, key", parameters
            )
        ]
