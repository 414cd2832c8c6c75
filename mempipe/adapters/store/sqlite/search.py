"""The SQLite store's read path: FTS5 and sqlite-vec searches with the identity filter inside."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mempipe.adapters.store.sqlite import search_sql
from mempipe.adapters.store.sqlite.extraction import blob
from mempipe.domain.fusion import fuse_hits
from mempipe.schemas.search import Hit, ReadFilter


def _hit(source: str, row: tuple[Any, ...]) -> Hit:
    memory_id, text, org, project, user, agent, session, visibility, message_id, score = row
    return Hit(
        id=memory_id,
        source=source,
        score=float(score),
        text=text,
        org_id=org,
        project_id=project,
        user_id=user,
        agent_id=agent,
        session_id=session,
        visibility=visibility,
        message_id=message_id,
    )


class SqliteSearchOps:
    """A NULL distance (a stored vector without direction, from before vectors were checked at
    the door) is skipped, never handed to a caller."""

    def _rows(self, query: str, bindings: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def active_embedding(self, collection: str) -> tuple[str, int] | None:
        rows = self._rows(
            "SELECT model_id, dimensions FROM embedding_registry "
            "WHERE collection = ? AND state = 'serving'",
            (collection,),
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def search_text(self, source: str, query: str, filters: ReadFilter, k: int) -> list[Hit]:
        match = search_sql.fts_query(query)
        if match is None:
            return []
        sql, values = search_sql.text_search_sql(source, filters)
        return [_hit(source, row) for row in self._rows(sql, (match, *values, k))]

    def search_vector(
        self, source: str, vector: list[float], model_id: str, filters: ReadFilter, k: int
    ) -> list[Hit]:
        sql, values = search_sql.vector_search_sql(source, model_id, filters)
        rows = self._rows(sql, (blob(vector), k, *values))
        return [_hit(source, row) for row in rows if row[-1] is not None]

    def search_hybrid(
        self,
        source: str,
        query: str,
        vector: list[float] | None,
        model_id: str | None,
        filters: ReadFilter,
        k: int,
        pool: int,
    ) -> list[Hit]:
        text_hits = self.search_text(source, query, filters, pool)
        if vector is None or model_id is None:
            return fuse_hits(text_hits, [], k)
        return fuse_hits(text_hits, self.search_vector(source, vector, model_id, filters, pool), k)
