"""SQL for long-term memories in SQLite: one table per type, an FTS5 index and one sqlite-vec
table per (type, embedding model)."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from mempipe.adapters.store.sqlite.sql import to_sql
from mempipe.domain.declarations import column_for
from mempipe.errors import ConfigError
from mempipe.schemas.identity import SESSION_IDENTITY_FIELDS
from mempipe.schemas.indexes import Quantization
from mempipe.schemas.memory import MEMORY_MODELS, CustomMemory, MemoryRecord

COMMON = tuple(f for f in MemoryRecord.model_fields if f != "embedding")
"""Every memory table's shared columns, from the memory model (vectors live in sqlite-vec)."""
SPECIFIC: dict[str, tuple[str, ...]] = {
    str(memory_type): tuple(f for f in model.model_fields if f not in MemoryRecord.model_fields)
    for memory_type, model in {**MEMORY_MODELS, "custom": CustomMemory}.items()
}
"""Each type's own columns, from its model (the fields its model adds to every memory's)."""
STM_FILTERS = SESSION_IDENTITY_FIELDS
"""A turn vector's filter columns: its identity."""
VECTOR_FILTERS = (*SESSION_IDENTITY_FIELDS, "visibility", "status")
"""A memory vector's filter columns: its identity, who may see it, and whether it is current."""


TOKENIZER = "porter unicode61 remove_diacritics 2"
"""The text indexes' tokenizer: Porter stemming over unicode61 (recall@10 of the LongMemEval
development set's text search 0.778 -> 0.836; BENCHMARKS.md, "Retrieval quality")."""
TOKENIZER_ARGS = ("unicode61", "remove_diacritics", "2")
"""The same, as apsw's ``fts5_tokenizer("porter", ...)`` takes it."""


def source_table(collection: str) -> tuple[str, str]:
    """(table, the SQL of the text a record is embedded from, over alias ``s``): a turn is
    embedded with its speaker's name, as the text index sees it."""
    if collection == "stm":
        return "turns", SPOKEN_TEXT_SQL.format(alias="s")
    return table(collection), "s.text"


SPOKEN_TEXT_SQL = (
    "CASE WHEN coalesce({alias}.name, '') = '' THEN {alias}.content "
    "ELSE {alias}.name || ': ' || {alias}.content END"
)
"""SQL twin of :func:`mempipe.domain.spoken.spoken_text`."""


def text_index_ddl(collection: str) -> str:
    """The FTS5 index of a collection; a turn's index holds its speaker's name beside the text."""
    if collection == "stm":
        columns, source, key = "name, content", "turns", "id"
    else:
        columns, source, key = "text", table(collection), "rowid"
    return (
        f"CREATE VIRTUAL TABLE {source}_fts USING fts5({columns}, content='{source}', "
        f"content_rowid='{key}', tokenize='{TOKENIZER}')"
    )


_VEC_DDL = re.compile(
    r"float\[(?P<dims>\d+)\]\s*distance_metric=(?P<metric>\w+),(?P<rest>.*)\)\s*$", re.S
)
QUANTIZED = "quantized"
"""A quantized index's second vector column, beside the full vectors it is ranked by."""
QUANTIZED_TYPES = {Quantization.SCALAR: "int8", Quantization.BINARY: "bit"}
_QUANTIZERS = {
    Quantization.SCALAR: "vec_quantize_int8(vec_normalize({}), 'unit')",
    Quantization.BINARY: "vec_quantize_binary({})",
}


def quantize_sql(quantization: Quantization, value: str = "?") -> str:
    """sqlite-vec's own quantizer of ``value``: a stored vector and a query are quantized alike.
    Scalar quantization scales [-1, 1] to a byte, so the vector is brought to unit length first
    (its cosine does not change)."""
    return _QUANTIZERS[quantization].format(value)


OVERSAMPLE = {Quantization.SCALAR: 2, Quantization.BINARY: 10}
"""Candidates a quantized KNN finds per result, before the full vectors rank them (recall on the
LongMemEval development set: BENCHMARKS.md, "Quantized vector indexes")."""


class VectorShape(NamedTuple):
    """What an existing vec0 table is, read from its DDL."""

    dimensions: int
    metric: str
    columns: tuple[str, ...]
    quantization: Quantization


def parse_vector_ddl(sql: str) -> VectorShape:
    match = _VEC_DDL.search(sql)
    if match is None:
        raise ValueError(f"not a mempipe vector table: {sql}")
    parts = [part.split() for part in match["rest"].split(",") if part.strip()]
    quantization = Quantization.NONE
    for words in parts:
        if words[0] == QUANTIZED:
            kind = words[1].split("[")[0]
            quantization = next(q for q, t in QUANTIZED_TYPES.items() if t == kind)
    columns = tuple(words[0] for words in parts if "=" not in words[0] and words[0] != QUANTIZED)
    return VectorShape(int(match["dims"]), match["metric"], columns, quantization)


def vector_partition_key(sql: str) -> str | None:
    """The column an existing vec0 table is partitioned by, from its DDL."""
    found = re.search(r"(\w+)\s+text\s+partition\s+key", sql, re.IGNORECASE)
    return found[1] if found else None


def table(memory_type: str) -> str:
    if memory_type not in SPECIFIC:
        raise ValueError(f"unknown memory type {memory_type!r}")
    return f"memories_{memory_type}"


def vector_table(memory_type: str, model_id: str) -> str:
    return f"vec_{memory_type}__{re.sub(r'[^a-z0-9]+', '_', model_id.lower()).strip('_')}"


PARTITION_KEY = "user_id"
"""Vectors are stored per user: a user-scoped KNN reads that user's vectors, not all of them."""
CHUNK_SIZE = 64
"""Vectors per sqlite-vec chunk. A chunk is allocated whole for each user, so chunks sized for
the whole table (1,024) would multiply the file size by the number of users with few vectors
(100,000 turns over 600 users: 927 MB at 1,024, 195 MB at 64)."""


def vector_table_ddl(
    name: str,
    dimensions: int,
    columns: tuple[str, ...],
    quantization: Quantization = Quantization.NONE,
) -> str:
    """The vec0 table, then the index on its chunks' partition that sqlite-vec does not make.
    A quantized table holds the full vectors and their quantized copy, which its KNN scans."""
    filters = ", ".join(
        f"{column} text partition key" if column == PARTITION_KEY else f"{column} text"
        for column in columns
    )
    quantized = ""
    if quantization is not Quantization.NONE:
        if quantization is Quantization.BINARY and dimensions % 8:
            raise ConfigError(
                f"binary quantization needs dimensions divisible by 8, not {dimensions}"
            )
        metric = " distance_metric=cosine" if quantization is Quantization.SCALAR else ""
        quantized = f"{QUANTIZED} {QUANTIZED_TYPES[quantization]}[{dimensions}]{metric}, "
    table = (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0("
        f"memory_rowid integer primary key, embedding float[{dimensions}] distance_metric=cosine, "
        f"{quantized}{filters}, chunk_size={CHUNK_SIZE})"
    )
    return f"{table}; {partition_index_ddl(name)}" if PARTITION_KEY in columns else table


def partition_index_ddl(name: str) -> str:
    """sqlite-vec 0.1.9 finds a partition's chunks with ``WHERE partition00 = ?`` on its chunk
    table, which has no index: a user-scoped KNN read every chunk row of the table (6.5 ms at
    1,000,000 turns, 0.24 ms with this index)."""
    return f"CREATE INDEX IF NOT EXISTS {name}_by_partition ON {name}_chunks (partition00)"


def declared_filters(collection: str, partition_keys: tuple[str, ...]) -> tuple[str, ...]:
    """The filter columns a collection's vector index should have: identity fields, then one
    per declared metadata partition key."""
    base = STM_FILTERS if collection == "stm" else VECTOR_FILTERS
    return (*base, *(column_for(k) for k in partition_keys))


def filter_values_sql(collection: str, columns: tuple[str, ...]) -> str:
    """SELECT expressions giving a record's value for each filter column ('' when absent)."""
    parts = []
    for column in columns:
        if column.startswith("meta_"):
            path = column.removeprefix("meta_").replace("__", ".")
            parts.append(f"coalesce(json_extract(s.metadata, '$.{path}'), '')")
        else:
            parts.append(f"coalesce(s.{column}, '')")
    return ", ".join(parts)


def insert_sql(memory_type: str) -> str:
    columns = (*COMMON, *SPECIFIC[memory_type])
    return (
        f"INSERT INTO {table(memory_type)} ({', '.join(columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)}) RETURNING rowid"
    )


def record_row(memory_type: str, record: MemoryRecord) -> tuple[Any, ...]:
    data = record.model_dump()
    data["metadata"] = data["metadata"] or None
    return tuple(to_sql(data[c]) for c in (*COMMON, *SPECIFIC[memory_type]))
