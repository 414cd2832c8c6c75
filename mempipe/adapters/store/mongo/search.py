"""The MongoDB store's search role: $search text, $vectorSearch vectors and their fusion over turns
and memories."""

from __future__ import annotations

from typing import Any

from mempipe.adapters.store.mongo import documents, pipelines
from mempipe.adapters.store.mongo.base import MongoParts
from mempipe.domain.fusion import fuse_hits
from mempipe.domain.query import query_words
from mempipe.errors import StoreError
from mempipe.schemas.search import Hit, Near, ReadFilter, collection_of


class MongoSearch(MongoParts):
    """Reads for ``mempipe search`` and the recall gate."""

    def _run(self, source: str, pipeline: list[dict[str, Any]], vector: bool) -> list[Hit]:
        collection = self._collection(collection_of(source))
        with self._errors(f"search {source}"):
            found = list(collection.aggregate(pipeline))
        return [
            documents.hit(source, d, pipelines.cosine(d["score"]) if vector else d["score"])
            for d in found
        ]

    def search_text(self, source: str, query: str, filters: ReadFilter, k: int) -> list[Hit]:
        if not query_words(query):
            return []
        self._check_text_filters(source, filters)
        pipeline = pipelines.text_search_pipeline(
            collection_of(source), query, k, documents.source_query(source, filters)
        )
        return self._run(source, pipeline, vector=False)

    def _check_text_filters(self, source: str, filters: ReadFilter) -> None:
        """Atlas answers ``equals`` on a path its index does not map with no results, not an
        error: a partition key the *serving* definition does not map (declared after the text
        index was built, or while its update is still building) is refused here."""
        if not filters.metadata:
            return
        collection = collection_of(source)
        definition = self.search_indexes.serving(self._collection(collection), pipelines.TEXT_INDEX)
        mapped = pipelines.token_paths(definition or {})
        missing = [path for path in filters.metadata if path not in mapped]
        if missing:
            raise StoreError(
                f"the {source} text index does not serve {', '.join(missing)} yet (declared "
                "after it was built, or its rebuild is still building): run `mempipe "
                "rebuild-indexes --force`, which waits until the new definition serves"
            )

    def search_vector(self, source: str, near: Near, filters: ReadFilter, k: int) -> list[Hit]:
        entry = self._entry(collection_of(source), near.model_id)
        pipeline = pipelines.vector_search_pipeline(
            entry["vector_table"],
            entry["path"],
            near.vector,
            k,
            documents.source_query(source, filters),
        )
        return self._run(source, pipeline, vector=True)

    def search_hybrid(
        self, source: str, query: str, near: Near | None, filters: ReadFilter, k: int, pool: int
    ) -> list[Hit]:
        """Both lists fused here with the fusion SQLite uses, so that both backends rank alike
        (a server's ``$rankFusion`` ranks by rank alone, which loses to the text list alone
        where the vector list is weak: BENCHMARKS.md, "Retrieval quality")."""
        text_hits = self.search_text(source, query, filters, pool)
        vector_hits = [] if near is None else self.search_vector(source, near, filters, pool)
        return fuse_hits(text_hits, vector_hits, k, pool)
