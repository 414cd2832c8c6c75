"""The SQLite store's run log: each run's parameters, process, outcome and checkpoints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from mempipe.adapters.store.sqlite import sql
from mempipe.adapters.store.sqlite.base import SqliteParts, now_text
from mempipe.schemas.costs import SpendRow
from mempipe.schemas.run import RunRecord, RunStatus


class SqliteRunLog(SqliteParts):
    """Runs as the store records them."""

    def start_run(self, run: RunRecord) -> None:
        with self._writing():
            self._conn.execute(
                sql.UPSERT_RUN,
                (
                    run.run_id,
                    run.flow,
                    orjson.dumps(run.parameters).decode(),
                    run.status.value,
                    orjson.dumps(run.counts).decode(),
                    orjson.dumps(run.checkpoints).decode(),
                    run.error,
                    sql.iso(run.started_at),
                    sql.iso(run.finished_at),
                    run.host,
                    run.pid,
                    run.machine,
                    sql.iso(run.heartbeat_at),
                ),
            )

    def finish_run(
        self, run_id: str, status: RunStatus, counts: dict[str, int], error: str | None = None
    ) -> None:
        """The run's leases end with it."""
        with self._writing():
            self._conn.execute(
                sql.FINISH_RUN,
                (status.value, orjson.dumps(counts).decode(), error, now_text(), run_id),
            )
            self._conn.execute("DELETE FROM leases WHERE run_id = ?", (run_id,))

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._rows(sql.SELECT_RUN, (run_id,))
        return self._run_from_row(rows[0]) if rows else None

    def _run_from_row(self, row: tuple[Any, ...]) -> RunRecord:
        rid, flow, params, status, counts, checkpoints, error, started, finished = row[:9]
        host, pid, machine, heartbeat = row[9:]
        return RunRecord(
            run_id=rid,
            flow=flow,
            parameters=orjson.loads(params),
            status=RunStatus(status),
            counts=orjson.loads(counts),
            checkpoints=orjson.loads(checkpoints),
            error=error,
            started_at=sql.parse_iso(started),
            finished_at=sql.parse_iso(finished),
            host=host,
            pid=pid,
            machine=machine,
            heartbeat_at=sql.parse_iso(heartbeat),
        )

    def list_runs(self, *, running_only: bool = False, limit: int = 50) -> list[RunRecord]:
        where = "WHERE status = 'running'" if running_only else ""
        return [
            self._run_from_row(row)
            for row in self._rows(
                f"{sql.SELECT_RUNS} {where} ORDER BY started_at DESC LIMIT ?", (limit,)
            )
        ]

    def set_checkpoint(self, run_id: str, name: str, value: Any) -> None:
        with self._writing():
            self._conn.execute(
                "UPDATE runs SET checkpoints = json_set(checkpoints, ?, json(?)) WHERE run_id = ?",
                (sql.json_key(name), orjson.dumps(value).decode(), run_id),
            )

    def resume_point(self, flow: str, name: str, run_id: str) -> Any | None:
        rows = self._rows(
            "SELECT status, json_extract(checkpoints, ?) FROM runs WHERE flow = ? AND run_id != ? "
            "ORDER BY started_at DESC LIMIT 1",
            (sql.json_key(name), flow, run_id),
        )
        if not rows or rows[0][0] == RunStatus.COMPLETED.value:
            return None
        return rows[0][1]

    def add_spend(self, rows: Sequence[SpendRow]) -> None:
        with self._writing():
            self._conn.executemany(
                "INSERT INTO run_spend (run_id, day, kind, model, memory_type, via, requests, "
                "input_tokens, output_tokens, unreported) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, day, kind, model, memory_type, via) DO UPDATE SET "
                "requests = requests + excluded.requests, "
                "input_tokens = input_tokens + excluded.input_tokens, "
                "output_tokens = output_tokens + excluded.output_tokens, "
                "unreported = unreported + excluded.unreported",
                [
                    (
                        *r.key,
                        r.requests,
                        r.input_tokens,
                        r.output_tokens,
                        r.unreported,
                    )
                    for r in rows
                ],
            )

    def spend(
        self, run_id: str | None = None, since: str | None = None, until: str | None = None
    ) -> list[SpendRow]:
        where, bindings = ["1 = 1"], []
        for clause, value in (("run_id = ?", run_id), ("day >= ?", since), ("day <= ?", until)):
            if value is not None:
                where.append(clause)
                bindings.append(value)
        names = (
            "run_id, day, kind, model, memory_type, via, requests, input_tokens, output_tokens, "
            "unreported"
        )
        return [
            SpendRow(**dict(zip(names.split(", "), row, strict=True)))
            for row in self._rows(
                f"SELECT {names} FROM run_spend WHERE {' AND '.join(where)} "
                "ORDER BY day, run_id, kind, model, memory_type, via",
                bindings,
            )
        ]
