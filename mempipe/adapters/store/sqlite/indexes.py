"""The SQLite store's index-admin role: write-once declarations, and the FTS5 and vector indexes
checked against them and rebuilt."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from mempipe.adapters.store.sqlite import memory_sql
from mempipe.adapters.store.sqlite.base import SqliteParts
from mempipe.domain.declarations import check_declarations, declared_definitions
from mempipe.schemas.config import CustomTypeConfig
from mempipe.schemas.embedding import COLLECTIONS, RegistryEntry
from mempipe.schemas.indexes import UNQUANTIZED, IndexState, IndexStatus, Quantization

TEXT_INDEXES = {name: f"{memory_sql.source_table(name)[0]}_fts" for name in COLLECTIONS}
"""collection -> its FTS5 index."""


METRIC = "cosine"
CHUNK_INDEX_MISSING = "index on the chunks' partition key missing"


class SqliteIndexAdmin(SqliteParts):
    """Declarations and index health."""

    registry: Callable[[], list[RegistryEntry]]

    def load_declarations(self) -> None:
        if self._rows("SELECT 1 FROM sqlite_master WHERE name = 'declarations'"):
            declared = self._rows("SELECT kind, name FROM declarations ORDER BY name")
            self.partition_keys = tuple(n for k, n in declared if k == "partition_key")
            self.custom_types = tuple(n for k, n in declared if k == "custom_type")
        if self._rows("SELECT 1 FROM sqlite_master WHERE name = 'vector_index_settings'"):
            settings = self._rows("SELECT collection, quantization FROM vector_index_settings")
            self.quantization = {**UNQUANTIZED, **{c: Quantization(q) for c, q in settings}}

    def declare_quantization(self, declared: Mapping[str, Quantization]) -> None:
        """Record each collection's quantization as the configuration declares it now (a
        change leaves its vector indexes drifted until rebuilt on purpose)."""
        changed = {c: q for c, q in declared.items() if self.quantization[c] is not q}
        if changed:
            with self._writing():
                self._conn.executemany(
                    "INSERT INTO vector_index_settings (collection, quantization, declared_at) "
                    "VALUES (?, ?, datetime('now')) ON CONFLICT (collection) DO UPDATE SET "
                    "quantization = excluded.quantization, declared_at = excluded.declared_at",
                    [(c, q.value) for c, q in changed.items()],
                )
            self.load_declarations()

    def declare(
        self, partition_keys: Sequence[str], custom_types: Sequence[CustomTypeConfig]
    ) -> list[tuple[str, str]]:
        """Record what the configuration declares; refuse removals and changes (write-once).
        Returns what was added; an added partition key leaves vector indexes drifted."""
        recorded = {
            (kind, name): definition
            for kind, name, definition in self._rows(
                "SELECT kind, name, definition FROM declarations"
            )
        }
        declared = declared_definitions(partition_keys, custom_types)
        added = check_declarations(recorded, declared)
        if added:
            with self._writing():
                self._conn.executemany(
                    "INSERT INTO declarations (kind, name, definition, declared_at) "
                    "VALUES (?, ?, ?, datetime('now'))",
                    [(kind, name, declared[(kind, name)]) for kind, name in added],
                )
        self.load_declarations()
        return added

    def index_status(self) -> list[IndexStatus]:
        statuses = [self._text_status(c) for c in TEXT_INDEXES]
        for entry in self.registry():
            statuses.append(self._vector_status(entry))
        return statuses

    def rebuild_indexes(self, force: bool) -> list[IndexStatus]:
        """Create absent indexes; rebuild drifted vector indexes when ``force`` (vectors are
        copied and quantized as declared, not re-computed; a dimension drift needs a re-embed
        and is only reported)."""
        results = []
        for status in self.index_status():
            with self._writing():
                results.append(self._repair(status, force))
        return results

    def _text_status(self, collection: str) -> IndexStatus:
        name = TEXT_INDEXES[collection]
        status = IndexStatus(collection=collection, kind="text", name=name, state=IndexState.OK)
        found = self._rows("SELECT sql FROM sqlite_master WHERE name = ?", (name,))
        if not found:
            status.state = IndexState.ABSENT
        elif _words(found[0][0]) != _words(memory_sql.text_index_ddl(collection)):
            status.state = IndexState.DRIFT
            status.differences.append(
                f"defined as {found[0][0]!r}, declared {memory_sql.text_index_ddl(collection)!r}"
            )
        return status

    def _vector_status(self, entry: RegistryEntry) -> IndexStatus:
        status = IndexStatus.of_vectors(entry)
        sql = self._rows("SELECT sql FROM sqlite_master WHERE name = ?", (entry.vector_table,))
        if not sql:
            status.state = IndexState.ABSENT
            return status
        dimensions, metric, columns, quantization = memory_sql.parse_vector_ddl(sql[0][0])
        declared = memory_sql.declared_filters(entry.collection, self.partition_keys)
        if dimensions != entry.dimensions:
            status.differences.append(f"dimensions {dimensions}, declared {entry.dimensions}")
        if metric != METRIC:
            status.differences.append(f"metric {metric}, declared {METRIC}")
        if quantization is not self.quantization[entry.collection]:
            status.differences.append(
                f"quantization {quantization}, declared {self.quantization[entry.collection]}"
            )
        missing = [c for c in declared if c not in columns]
        extra = [c for c in columns if c not in declared]
        if missing:
            status.differences.append(f"filter fields missing: {', '.join(missing)}")
        if extra:
            status.differences.append(f"filter fields not declared: {', '.join(extra)}")
        partition = memory_sql.vector_partition_key(sql[0][0])
        if partition != memory_sql.PARTITION_KEY:
            status.differences.append(
                f"partitioned by {partition or 'nothing'}, declared {memory_sql.PARTITION_KEY}"
            )
        elif not self._rows(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (f"{entry.vector_table}_by_partition",)
        ):
            status.differences.append(CHUNK_INDEX_MISSING)
        if status.differences:
            status.state = IndexState.DRIFT
        return status

    def _repair_text(self, status: IndexStatus, force: bool) -> IndexStatus:
        """An absent text index is made; a drifted one (another tokenizer or columns) is made
        anew only when ``force``: either way from its content table, nothing is lost."""
        if status.state is IndexState.OK or (status.state is IndexState.DRIFT and not force):
            return status
        self._conn.execute(f"DROP TABLE IF EXISTS {status.name}")
        self._conn.execute(memory_sql.text_index_ddl(status.collection))
        self._conn.execute(f"INSERT INTO {status.name} ({status.name}) VALUES ('rebuild')")
        made = IndexState.CREATED if status.state is IndexState.ABSENT else IndexState.REBUILT
        return status.model_copy(update={"state": made})

    def _repair(self, status: IndexStatus, force: bool) -> IndexStatus:
        if status.kind == "text":
            return self._repair_text(status, force)
        if status.kind != "vector" or status.state is IndexState.OK:
            return status
        entry = next(e for e in self.registry() if e.vector_table == status.name)
        columns = memory_sql.declared_filters(entry.collection, self.partition_keys)
        quantization = self.quantization[entry.collection]
        ddl = memory_sql.vector_table_ddl(status.name, entry.dimensions, columns, quantization)
        if status.state is IndexState.ABSENT:
            self._conn.execute(ddl)
            return status.model_copy(update={"state": IndexState.CREATED})
        if status.differences == [CHUNK_INDEX_MISSING]:
            self._conn.execute(memory_sql.partition_index_ddl(status.name))
            return status.model_copy(update={"state": IndexState.CREATED})
        if not force or any(d.startswith("dimensions") for d in status.differences):
            return status
        source, _ = memory_sql.source_table(entry.collection)
        staging = f"{status.name}__rebuild"
        values = memory_sql.filter_values_sql(entry.collection, columns)
        names = ", ".join(columns)
        quantized = "" if quantization is Quantization.NONE else f"{memory_sql.QUANTIZED}, "
        quantize = quantized and f"{memory_sql.quantize_sql(quantization, 'v.embedding')}, "
        self._conn.execute(
            memory_sql.vector_table_ddl(staging, entry.dimensions, columns, quantization)
        )
        self._conn.execute(
            f"INSERT INTO {staging} (memory_rowid, embedding, {quantized}{names}) "
            f"SELECT v.memory_rowid, v.embedding, {quantize}{values} FROM {status.name} v "
            f"JOIN {source} s ON s.rowid = v.memory_rowid"
        )
        self._conn.execute(f"DROP TABLE {status.name}")
        self._conn.execute(ddl)
        self._conn.execute(
            f"INSERT INTO {status.name} (memory_rowid, embedding, {quantized}{names}) "
            f"SELECT memory_rowid, embedding, {quantized}{names} FROM {staging}"
        )
        self._conn.execute(f"DROP TABLE {staging}")
        return status.model_copy(update={"state": IndexState.REBUILT})


def _words(ddl: str) -> list[str]:
    """A definition's words, whatever its spacing and quoting."""
    return re.findall(r"[\w.]+", ddl.replace("IF NOT EXISTS", ""))
