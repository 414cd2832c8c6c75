"""The SQLite store's file log: where mempipe wrote users' text outside the store."""

from __future__ import annotations

from mempipe.adapters.store.sqlite import sql
from mempipe.adapters.store.sqlite.base import SqliteParts
from mempipe.schemas.run import WrittenFile


class SqliteFileLog(SqliteParts):
    def record_file(self, file: WrittenFile) -> None:
        with self._writing():
            self._conn.execute(
                "INSERT INTO written_files (path, kind, run_id, user_id, written_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET "
                "run_id = excluded.run_id, written_at = excluded.written_at",
                (file.path, file.kind.value, file.run_id, file.user_id, sql.iso(file.written_at)),
            )

    def written_files(self) -> list[WrittenFile]:
        return [
            WrittenFile(path=p, kind=k, run_id=r, user_id=u, written_at=at)
            for p, k, r, u, at in self._rows(
                "SELECT path, kind, run_id, user_id, written_at FROM written_files ORDER BY path"
            )
        ]

    def store_id(self) -> str:
        return str(self._rows("SELECT id FROM store_identity")[0][0])
