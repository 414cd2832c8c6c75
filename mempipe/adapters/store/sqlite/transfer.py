"""The SQLite store's transfer role: every record of a collection, as its model, read in pages
for a bundle (every memory version, snapshots with their extraction states)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from mempipe.adapters.store.sqlite import memory_sql, sql
from mempipe.adapters.store.sqlite.base import SqliteParts
from mempipe.domain.ids import turn_key_of, turn_ref
from mempipe.schemas.bundle import (
    BUNDLE_MODELS,
    MEMORY_COLLECTIONS,
    BundleSelection,
    store_collection,
)
from mempipe.schemas.run import RunRecord
from mempipe.schemas.snapshot import ExtractionState, Snapshot
from mempipe.schemas.turn import TURN_FIELDS, SourceLocation, Turn

RUN_FIELDS = tuple(RunRecord.model_fields)
SOURCE_COLUMNS = tuple(f"source_{f}" for f in SourceLocation.model_fields)
TURN_REF = ("org_id", "project_id", "user_id", "session_id", "turn_seq")


class SqliteTransfer(SqliteParts):
    """Reads for export and copy."""

    def export_page(
        self, collection: str, selection: BundleSelection, after: Any, limit: int
    ) -> tuple[list[BaseModel], Any]:
        """Up to ``limit`` records after the cursor ``after`` (None: from the start), and the
        cursor to pass next."""
        start = after or 0
        if collection == "turns":
            return self._turns(selection, start, limit)
        if collection == "snapshots":
            return self._snapshots(selection, start, limit)
        model = BUNDLE_MODELS[collection]
        if collection in MEMORY_COLLECTIONS:
            names = (*memory_sql.COMMON, *memory_sql.SPECIFIC[collection])
            table, key = memory_sql.table(collection), "rowid"
            selected = _identity(selection)
        else:
            names = tuple(model.model_fields)
            table, key = {"audit": ("audit", "id"), "failures": ("failures", "id")}.get(
                collection, ("runs", "rowid")
            )
            selected = _selected(collection, selection)
        rows = self._page(table, key, names, selected, start, limit)
        records = [model.model_validate(sql.from_sql_row(model, names, row[1:])) for row in rows]
        return records, rows[-1][0] if rows else start

    def export_vectors(
        self, collection: str, model_id: str, selection: BundleSelection, after: Any, limit: int
    ) -> tuple[list[tuple[str, list[float]]], Any]:
        """The vectors of ``model_id`` of a bundle collection's records, by record reference
        (a memory's id, a turn's key), in pages."""
        source = "turns" if collection == "turns" else memory_sql.table(collection)
        table = memory_sql.vector_table(store_collection(collection), model_id)
        ref = TURN_REF if collection == "turns" else ("id",)
        rows = self._page(source, "rowid", ref, _identity(selection), after or 0, limit)
        found = []
        for row in rows:
            vector = self._rows(f"SELECT embedding FROM {table} WHERE memory_rowid = ?", (row[0],))
            if vector:
                key = turn_ref(*row[1:]) if collection == "turns" else row[1]
                found.append((key, np.frombuffer(vector[0][0], dtype=np.float32).tolist()))
        return found, rows[-1][0] if len(rows) == limit else None

    def record_rowids(self, collection: str, refs: Sequence[str]) -> dict[str, int]:
        """The store's own record ids of records named by reference (those it holds)."""
        found: dict[str, int] = {}
        for ref in refs:
            if collection == "turns":
                rows = self._rows(
                    f"SELECT id FROM turns WHERE ({sql.TURN_KEY}) = (?, ?, ?, ?, ?)",
                    turn_key_of(ref),
                )
            else:
                rows = self._rows(
                    f"SELECT rowid FROM {memory_sql.table(collection)} WHERE id = ?", (ref,)
                )
            if rows:
                found[ref] = rows[0][0]
        return found

    def add_runs(self, runs: Sequence[RunRecord]) -> set[str]:
        """Runs as they were recorded elsewhere; a run id already here is left alone."""
        added: set[str] = set()
        with self._writing():
            for run in runs:
                row = [sql.to_sql(getattr(run, f)) for f in RUN_FIELDS]
                added |= {
                    r[0]
                    for r in self._conn.execute(
                        f"INSERT INTO runs ({', '.join(RUN_FIELDS)}) VALUES "
                        f"({', '.join('?' for _ in RUN_FIELDS)}) ON CONFLICT DO NOTHING "
                        "RETURNING run_id",
                        row,
                    )
                }
        return added

    def _turns(self, selection: BundleSelection, start: int, limit: int) -> tuple[list, Any]:
        names = (*TURN_FIELDS, "snapshot_id")
        rows = self._page(
            "turns", "id", (*names, *SOURCE_COLUMNS), _identity(selection), start, limit
        )
        turns = []
        for row in rows:
            own, source = row[1 : 1 + len(names)], row[1 + len(names) :]
            fields = sql.from_sql_row(Turn, names, own)
            fields["source"] = dict(zip(SourceLocation.model_fields, source, strict=True))
            turns.append(Turn.model_validate(fields))
        return turns, rows[-1][0] if rows else start

    def _snapshots(self, selection: BundleSelection, start: str, limit: int) -> tuple[list, Any]:
        names = tuple(f for f in Snapshot.model_fields if f not in ("snapshot_id", "extraction"))
        rows = self._page("snapshots", "id", names, _identity(selection), start or "", limit)
        states: dict[str, list[ExtractionState]] = {}
        if rows:
            marks = ", ".join("?" for _ in rows)
            fields = ("handler", "status", "attempts", "last_error", "extractor", "prompt_version")
            for snapshot_id, *values in self._rows(
                f"SELECT snapshot_id, {', '.join(fields)} FROM "
                f"snapshot_extractions WHERE snapshot_id IN ({marks}) ORDER BY handler",
                [r[0] for r in rows],
            ):
                states.setdefault(snapshot_id, []).append(
                    ExtractionState.model_validate(dict(zip(fields, values, strict=True)))
                )
        snapshots = [
            Snapshot(
                snapshot_id=row[0],
                **sql.from_sql_row(Snapshot, names, row[1:]),
                extraction=states.get(row[0], []),
            )
            for row in rows
        ]
        return snapshots, rows[-1][0] if rows else start

    def _page(
        self,
        table: str,
        key: str,
        columns: Sequence[str],
        selected: tuple[str, list[Any]],
        after: Any,
        limit: int,
    ) -> list[tuple[Any, ...]]:
        """Up to ``limit`` selected rows after ``after`` in ``key`` order: the key, then
        ``columns``."""
        where, values = selected
        return self._rows(
            f"SELECT {key}, {', '.join(columns)} FROM {table} WHERE {key} > ? AND {where} "
            f"ORDER BY {key} LIMIT ?",
            (after, *values, limit),
        )


def _identity(selection: BundleSelection) -> tuple[str, list[Any]]:
    clauses, values = ["1 = 1"], []
    for field in ("org_id", "project_id", "user_id"):
        value = getattr(selection, field)
        if value is not None:
            clauses.append(f"{field} = ?")
            values.append(value)
    return " AND ".join(clauses), values


def _selected(collection: str, selection: BundleSelection) -> tuple[str, list[Any]]:
    """Audit rows by their identity; failures by their org and project, and by the user's
    snapshots; runs by what the selected audit rows and failures name."""
    if collection == "audit":
        return _identity(selection)
    org = BundleSelection(org_id=selection.org_id, project_id=selection.project_id)
    where, values = _identity(org)
    if selection.user_id is not None:
        where += " AND snapshot_id IN (SELECT id FROM snapshots WHERE user_id = ?)"
        values.append(selection.user_id)
    if collection == "failures":
        return where, values
    if selection == BundleSelection():
        return "1 = 1", []
    audit_where, audit_values = _identity(selection)
    return (
        f"(run_id IN (SELECT run_id FROM audit WHERE {audit_where}) "
        f"OR run_id IN (SELECT run_id FROM failures WHERE {where}))",
        [*audit_values, *values],
    )
