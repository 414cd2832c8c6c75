"""The SQLite store's search role: FTS5 text, sqlite-vec vectors and their fusion over turns and
memories."""

from __future__ import annotations

from typing import Any

from mempipe.adapters.store.sqlite import search_sql
from mempipe.adapters.store.sqlite.base import SqliteParts, blob
from mempipe.domain.fusion import fuse_hits
from mempipe.schemas.search import Hit, Near, ReadFilter


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


class SqliteSearch(SqliteParts):
    """Reads for ``mempipe search`` and the recall gate."""

    def search_text(self, source: str, query: str, filters: ReadFilter, k: int) -> list[Hit]:
        match = search_sql.fts_query(query)
        if match is None:
            return []
        sql, values = search_sql.text_search_sql(source, filters)
        return [_hit(source, row) for row in self._rows(sql, (match, *values, k))]

    def search_vector(self, source: str, near: Near, filters: ReadFilter, k: int) -> list[Hit]:
        sql, values = search_sql.vector_search_sql(source, near.model_id, filters)
        rows = self._rows(sql, (blob(near.vector), k, *values))
        return [_hit(source, row) for row in rows if row[-1] is not None]

    def search_hybrid(
        self, source: str, query: str, near: Near | None, filters: ReadFilter, k: int, pool: int
    ) -> list[Hit]:
        text_hits = self.search_text(source, query, filters, pool)
        vector_hits = [] if near is None else self.search_vector(source, near, filters, pool)
        return fuse_hits(text_hits, vector_hits, k)
