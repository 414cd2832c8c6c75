"""The SQLite store's turns role: turns written once per key, and promoted into snapshots."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

import orjson

from mempipe.adapters.store.base import TurnBatches, TurnResults
from mempipe.adapters.store.rejects import conflict_reject
from mempipe.adapters.store.sqlite import sql
from mempipe.adapters.store.sqlite.base import SqliteParts, now_text
from mempipe.adapters.store.sqlite.pipeline import overlapped, shared
from mempipe.domain.promotion import TurnStamp
from mempipe.schemas.reject import Reject
from mempipe.schemas.snapshot import Snapshot
from mempipe.schemas.summaries import TurnWriteResult
from mempipe.schemas.turn import Turn

C = TypeVar("C")


class SqliteTurns(SqliteParts):
    """Short-term memory: the raw turns and the snapshots cut from them. Batches go through
    :func:`overlapped`: encoded in the caller's thread, written in a writer thread."""

    def add_turns(self, turns: Sequence[Turn], run_id: str | None) -> TurnWriteResult:
        return self._write_turns(self._encode_turns(turns, run_id))

    def add_turn_batches(
        self, batches: TurnBatches[C], run_id: str | None, shared_up_to: int = 0
    ) -> TurnResults[C]:
        """Consecutive batches holding at most ``shared_up_to`` turns in all are encoded and
        committed as one group (each batch still counted on its own); a group's results come
        back once it is committed."""
        groups = overlapped(
            shared(batches, shared_up_to),
            lambda group: [self._encode_turns(turns, run_id) for turns in group],
            self._write_turn_group,
        )
        for results, contexts in groups:
            yield from zip(results, contexts, strict=True)

    def _write_turn_group(self, group: list[tuple[Sequence[Turn], bytes]]) -> list[TurnWriteResult]:
        """A group of one file's batches each, as one statement: a directory of two-turn files
        pays one insert, one text-index sync and one lookup of what went in per 5,000 turns, not
        per file. Each batch is told apart by its file: its rows went in in order, so a batch's
        new ids follow the batch's before it."""
        if len(group) == 1:
            return [self._write_turns(group[0])]
        paths = [turns[0].source.path for turns, _ in group if turns]
        if len(set(paths)) < len(paths) or any(
            turn.source.path != turns[0].source.path for turns, _ in group for turn in turns
        ):
            with self._writing():
                return [self._write_turns(batch) for batch in group]
        conn = self._conn
        payload = b"[" + b",".join(rows[1:-1] for turns, rows in group if turns) + b"]"
        with self._writing():
            before = conn.execute(sql.MAX_TURN_ID).fetchall()[0][0]
            conn.execute(sql.INSERT_TURNS, (payload,))
            inserted = dict(conn.execute(sql.INSERTED_BY_FILE, (before,)).fetchall())
            if inserted:
                conn.execute(sql.SYNC_TURNS_FTS, (before,))
            results = []
            for turns, _ in group:
                added = inserted.get(turns[0].source.path, 0) if turns else 0
                results.append(self._counted(turns, before, added))
                before += added
        return results

    def _encode_turns(
        self, turns: Sequence[Turn], run_id: str | None
    ) -> tuple[Sequence[Turn], bytes]:
        """The rows as one JSON array, for :data:`sql.INSERT_TURNS`."""
        return turns, orjson.dumps([sql.turn_row(turn, run_id) for turn in turns])

    def _write_turns(self, batch: tuple[Sequence[Turn], bytes]) -> TurnWriteResult:
        turns, payload = batch
        if not turns:
            return TurnWriteResult()
        conn = self._conn
        with self._writing():
            before = conn.execute(sql.MAX_TURN_ID).fetchall()[0][0]
            conn.execute(sql.INSERT_TURNS, (payload,))
            inserted = conn.execute(sql.MAX_TURN_ID).fetchall()[0][0] - before
            if inserted:
                conn.execute(sql.SYNC_TURNS_FTS, (before,))
            return self._counted(turns, before, inserted)

    def _counted(self, turns: Sequence[Turn], before: int, inserted: int) -> TurnWriteResult:
        """What became of a batch whose new rows are the ``inserted`` ids after ``before``."""
        conflicts, erased = self._conflicts(turns, before) if inserted < len(turns) else ([], 0)
        skipped = len(turns) - inserted - erased
        return TurnWriteResult(
            inserted=inserted,
            duplicates=skipped - len(conflicts),
            conflicts=conflicts,
            erased=erased,
        )

    def _conflicts(self, turns: Sequence[Turn], before: int) -> tuple[list[Reject], int]:
        """Skipped turns whose key is stored with other content (rejects, not duplicates), and
        how many have no row at all: their owner's erase fence dropped them."""
        keys = [(t.org_id, t.project_id, t.user_id or "", t.session_id, t.turn_seq) for t in turns]
        stored = {
            row[0]: row[1:]
            for row in self._conn.executemany(
                sql.STORED_TURN_BY_KEY, [(i, *key) for i, key in enumerate(keys)]
            )
        }
        winners: dict[tuple[str, str, str, str, int], Turn] = {}
        conflicts: list[Reject] = []
        for position, (turn, key) in enumerate(zip(turns, keys, strict=True)):
            if position not in stored:
                continue
            row_id, role, content, path, line, index = stored[position]
            if row_id > before and key not in winners:
                winners[key] = turn
                continue
            same_batch = winners.get(key) if row_id > before else None
            if same_batch is not None:
                role, content = same_batch.role.value, same_batch.content
                path, line, index = same_batch.source.path, same_batch.source.line, None
            if (role, content) == (turn.role.value, turn.content):
                continue
            conflicts.append(conflict_reject(turn, path, line, index))
        return conflicts, len(turns) - len(stored)

    def count_unpromoted_turns(self) -> int:
        return self._rows("SELECT count(*) FROM turns WHERE snapshot_id IS NULL")[0][0]

    def iter_unpromoted_turns(self, page_size: int = 5000) -> Iterator[TurnStamp]:
        """Read on a connection of its own: the promotion's writer thread holds the main one
        while it writes the batch before."""
        query, bindings = sql.unpromoted_page_sql(after_key=False), (page_size,)
        with self._reader() as reader:
            while page := reader.execute(query, bindings).fetchall():
                yield from map(sql.stamp_from_row, page)
                if len(page) < page_size:
                    return
                query = sql.unpromoted_page_sql(after_key=True)
                bindings = (*page[-1][:5], page_size)

    def add_snapshots(self, snapshots: Sequence[Snapshot]) -> set[str]:
        return self._write_snapshots(self._encode_snapshots(snapshots))

    def add_snapshot_batches(
        self, batches: Iterable[tuple[Sequence[Snapshot], C]]
    ) -> Iterator[tuple[set[str], C]]:
        return overlapped(batches, self._encode_snapshots, self._write_snapshots)

    def _encode_snapshots(self, snapshots: Sequence[Snapshot]) -> tuple[Sequence[Snapshot], Any]:
        """Three JSON arrays of rows: the snapshots, their extraction states, their marks."""
        now = now_text()
        states = [
            (
                s.snapshot_id,
                e.handler,
                e.status.value,
                e.attempts,
                e.last_error,
                e.extractor,
                e.prompt_version,
                now,
            )
            for s in snapshots
            for e in s.extraction
        ]
        marks = [
            (
                s.snapshot_id,
                s.org_id,
                s.project_id,
                s.user_id,
                s.session_id,
                s.first_turn_seq,
                s.last_turn_seq,
            )
            for s in snapshots
        ]
        rows = [sql.snapshot_row(s, now) for s in snapshots]
        return snapshots, tuple(map(orjson.dumps, (rows, states, marks)))

    def _write_snapshots(self, batch: tuple[Sequence[Snapshot], Any]) -> set[str]:
        snapshots, (rows, states, marks) = batch
        if not snapshots:
            return set()
        conn = self._conn
        with self._writing():
            (new,) = conn.execute(sql.NEW_SNAPSHOT_IDS, (rows,)).fetchall()[0]
            conn.execute(sql.INSERT_SNAPSHOTS, (rows,))
            conn.execute(sql.INSERT_EXTRACTION_STATES, (states,))
            conn.execute(sql.MARK_TURNS_PROMOTED, (marks,))
        return set(orjson.loads(new))
