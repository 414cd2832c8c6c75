"""The SQLite store's audit-log role: every ADD / UPDATE / REINFORCE, and every recorded failure."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from mempipe.adapters.store.sqlite import sql
from mempipe.adapters.store.sqlite.base import SqliteParts
from mempipe.schemas.audit import EVERY_ROW, AuditRow, AuditSelection, AuditTime
from mempipe.schemas.failure import Failure


class SqliteAuditLog(SqliteParts):
    """What runs did, row by row."""

    def add_audit(self, rows: Sequence[AuditRow]) -> None:
        if not rows:
            return
        columns = list(AuditRow.model_fields)
        self._conn.executemany(
            f"INSERT INTO audit ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
            [[sql.to_sql(getattr(r, c)) for c in columns] for r in rows],
        )

    def audit_rows(self, selection: AuditSelection = EVERY_ROW) -> Iterator[AuditRow]:
        clauses, values = ["1 = 1"], []
        after, before = (
            ("day >= ?", "day <= ?")
            if selection.by is AuditTime.APPLIED
            else ("observed_at >= ?", "observed_at < date(?, '+1 day')")
        )
        wanted = (selection.run_id, selection.since, selection.until)
        for clause, value in zip(("run_id = ?", after, before), wanted, strict=True):
            if value:
                clauses.append(clause)
                values.append(value)
        columns = list(AuditRow.model_fields)
        cursor = self._conn.cursor().execute(
            f"SELECT {', '.join(columns)} FROM audit WHERE {' AND '.join(clauses)} ORDER BY id",
            values,
        )
        for row in cursor:
            yield AuditRow.model_validate(dict(zip(columns, row, strict=True)))

    def add_failure(self, failure: Failure) -> None:
        row = failure.model_dump(mode="json")
        columns = list(row)
        with self._writing():
            self._conn.execute(
                f"INSERT INTO failures ({', '.join(columns)}) "
                f"VALUES ({', '.join('?' for _ in columns)})",
                [row[c] for c in columns],
            )

    def failure_counts(
        self, run_id: str | None = None, since: str | None = None, until: str | None = None
    ) -> dict[str, int]:
        clauses, values = ["1 = 1"], []
        for clause, value in (
            ("run_id = ?", run_id),
            ("substr(at, 1, 10) >= ?", since),
            ("substr(at, 1, 10) <= ?", until),
        ):
            if value:
                clauses.append(clause)
                values.append(value)
        counts = {"environmental": 0, "content": 0}
        counts.update(
            dict(
                self._rows(
                    f"SELECT failure_class, count(*) FROM failures WHERE {' AND '.join(clauses)} "
                    "GROUP BY 1",
                    values,
                )
            )
        )
        return counts
