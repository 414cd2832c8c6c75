"""Search latency on real text: LongMemEval turns loaded under many users, searched by the store.

The development set's 39,524 turns are repeated under further user ids until ``--turns`` is
reached, each user's history cut into parts of ``--per-user`` turns (one user id per part), so
100,000 turns make about 600 users. Every turn is embedded with ``--model`` (each distinct text
once, cached under ``--out``; ``hashing-384`` builds a store of the same shape in seconds, for
latency alone). The queries are LongMemEval's questions, each within its asker's first part, or
with ``--query-words N`` the first N words of turns drawn from the store, each within the user
who said it (common words: tens of thousands of matches org-wide). Measured: the store's text,
semantic and hybrid searches, top 10, within one user and across the whole org (the query vector
is computed beforehand: this times the store, not the model). Each measure is a first asking:
a connection of its own, opened with nothing held (the file's pages in the OS cache, as a
running service has them), asks each query once, then once again (printed beside: by then a
process holds what it read for the words it asked about). References in the same run: a
sqlite-vec KNN within one partition key, and a numpy scan of every vector.

    python bench/search.py --turns 100000 [--model hashing-384] [--query-words 8] [--spread]
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import orjson

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.embedding import ModelRegistration

if TYPE_CHECKING:
    from mempipe.adapters.store import Store

DATA = Path(
    os.environ.get(
        "MEMPIPE_LONGMEMEVAL", Path(__file__).parents[2] / "shared" / "data" / "longmemeval-dev"
    )
)
"""The LongMemEval development set (beside the checkout, or where MEMPIPE_LONGMEMEVAL says)."""


def repeated_turns(total: int, per_user: int, spread: bool = False) -> Iterator[dict]:
    """The development set again and again under new ids; with ``spread``, each copy's sessions
    in a shuffled order, so that a user's rows lie far apart (as in an archive written in time
    order by many users at once) instead of side by side."""
    copy, rng = 0, random.Random(3)
    while True:
        seen: dict[str, int] = {}
        with gzip.open(DATA / "turns.jsonl.gz") as lines:
            turns = [orjson.loads(line) for line in lines]
        if spread:
            sessions: dict[str, list[dict]] = {}
            for turn in turns:
                sessions.setdefault(turn["session_id"], []).append(turn)
            order = list(sessions.values())
            rng.shuffle(order)
            turns = [turn for session in order for turn in session]
        for turn in turns:
            n = seen[turn["user_id"]] = seen.get(turn["user_id"], -1) + 1
            turn["user_id"] = f"{turn['user_id']}~{copy}.{n // per_user}"
            turn["session_id"] = f"{turn['session_id']}~{copy}"
            turn["message_id"] = f"{turn['message_id']}~{copy}"
            yield turn
            total -= 1
            if total == 0:
                return
        copy += 1


def load_turns(store_path: Path, out: Path, turns: int, per_user: int, spread: bool) -> Store:
    """The repeated turns ingested into a new SQLite store at ``store_path``, left open."""
    from mempipe.adapters.store import open_store
    from mempipe.schemas.archive import ArchiveFormat, IngestRequest
    from mempipe.schemas.identity import IdentityDefaults
    from mempipe.services.backfill.ingest import ingest_file

    archive = out / f"turns-{turns}.jsonl"
    with archive.open("wb") as f:
        for turn in repeated_turns(turns, per_user, spread):
            f.write(orjson.dumps(turn) + b"\n")
    store = open_store(f"sqlite:///{store_path}", migrate=True)
    ingest_file(
        UnitOfWork(store),
        IngestRequest(
            path=archive,
            format=ArchiveFormat.TURNS,
            defaults=IdentityDefaults(org_id="bench", project_id="lme"),
            run_id="bench",
            rejects_file=out / "rejects.jsonl",
        ),
    )
    archive.unlink()
    return store


def build(store_path: Path, out: Path, turns: int, per_user: int, model: str, spread: bool) -> None:
    from mempipe.adapters.embedding import embedder_for

    store = load_turns(store_path, out, turns, per_user, spread)
    embedder = embedder_for(model)
    texts = dict.fromkeys(c for (c,) in store._rows("SELECT content FROM turns ORDER BY id"))
    cache = out / f"vectors-{model}-{len(texts)}.npy"
    if cache.exists():
        matrix = np.load(cache)
    else:
        started = time.perf_counter()
        matrix = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
        print(f"embedded {len(texts):,} distinct texts in {time.perf_counter() - started:.0f} s")
        np.save(cache, matrix)
    row_of = {text: i for i, text in enumerate(texts)}
    store.register_model(
        ModelRegistration(
            collection="stm", model_id=model, dimensions=embedder.dimensions, state="serving"
        )
    )
    rows = store._rows("SELECT id, content FROM turns ORDER BY id")
    for start in range(0, len(rows), 5000):
        batch = rows[start : start + 5000]
        store.set_vectors("stm", model, [(i, matrix[row_of[c]].tolist()) for i, c in batch])
    store.close()


def warm_os_cache(path: Path) -> None:
    """The store's file read once, so that the first timed asking finds its pages in the OS
    cache as a running service would; nothing of the store is held by this process."""
    with path.open("rb") as f:
        while f.read(1 << 24):
            pass


def timed(call: Callable[[], object], repeat: list[float]) -> None:
    started = time.perf_counter()
    call()
    repeat.append((time.perf_counter() - started) * 1000)


def summary(label: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    return f"{label:<34} p50 {statistics.median(ms):8.2f} ms   p95 {p95:8.2f} ms"


def drawn_queries(store: Store, count: int, words: int) -> list[dict]:
    """The first ``words`` words of ``count`` turns drawn with a fixed seed, each asked within
    the user who said it."""
    rng = random.Random(11)
    (top,) = store._rows("SELECT max(id) FROM turns")[0]
    queries: list[dict] = []
    while len(queries) < count:
        row = store._rows("SELECT user_id, content FROM turns WHERE id = ?", (rng.randint(1, top),))
        head = " ".join(row[0][1].split()[:words]) if row else ""
        if len(head.split()) == words:
            queries.append({"query": head, "user": row[0][0]})
    return queries


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--per-user", type=int, default=200)
    parser.add_argument("--queries", type=int, default=160)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--query-words", type=int, default=0)
    parser.add_argument("--spread", action="store_true", help="each user's sessions far apart")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "search")
    args = parser.parse_args()

    from mempipe.adapters.embedding import embedder_for
    from mempipe.adapters.store import open_store
    from mempipe.schemas.search import Near, ReadFilter
    from mempipe.services.search import CANDIDATES

    args.out.mkdir(parents=True, exist_ok=True)
    layout = "spread" if args.spread else "together"
    store_path = args.out / f"search-{args.turns}-{args.model}-{layout}.db"
    if not store_path.exists():
        build(store_path, args.out, args.turns, args.per_user, args.model, args.spread)
    store = open_store(f"sqlite:///{store_path}", migrate=True)
    users = store._rows("SELECT count(DISTINCT user_id), count(*) FROM turns")[0]
    print(f"store: {users[1]:,} turns, {users[0]:,} users ({store_path})")

    if args.query_words:
        queries = drawn_queries(store, args.queries, args.query_words)
    else:
        asked = [orjson.loads(line) for line in (DATA / "queries.jsonl").read_bytes().splitlines()]
        queries = [{"query": q["query"], "user": f"{q['user_id']}~0.0"} for q in asked]
        queries = (queries * (args.queries // len(queries) + 1))[: args.queries]
    embedder = embedder_for(args.model)
    embedder.embed(["warm up the model"])
    started = time.perf_counter()
    vectors = embedder.embed([q["query"] for q in queries])
    batch_ms = (time.perf_counter() - started) * 1000 / len(queries)
    one: list[float] = []
    for q in queries[:20]:
        timed(lambda q=q: embedder.embed([q["query"]]), one)
    print(summary("query embedding, one at a time", one))
    print(f"{'query embedding, in one batch':<34} {batch_ms:8.2f} ms per query")

    scopes = {
        "user": lambda q: ReadFilter(user_id=q["user"]),
        "org": lambda q: ReadFilter(org_id="bench"),
    }
    searches = {
        "text": lambda s, q, near, f: s.search_text("stm", q["query"], f, 10),
        "semantic": lambda s, q, near, f: s.search_vector("stm", near, f, 10),
        "hybrid": lambda s, q, near, f: s.search_hybrid("stm", q["query"], near, f, 10, CANDIDATES),
    }
    warm_os_cache(store_path)
    for scope, filters in scopes.items():
        for mode, search in searches.items():
            fresh = open_store(f"sqlite:///{store_path}")  # nothing this process held
            first: list[float] = []
            again: list[float] = []
            for asked in (first, again):
                for q, v in zip(queries, vectors, strict=True):
                    near, f = Near(vector=v, model_id=args.model), filters(q)
                    timed(lambda: search(fresh, q, near, f), asked)  # noqa: B023 (called at once)
            fresh.close()
            print(summary(f"{mode}, {scope}-scoped", first), "|", summary("again", again))

    rowids, matrix = references(store, args.model)
    ms = []
    for v in vectors:
        query = np.asarray(v, dtype=np.float32)
        timed(lambda query=query: np.argpartition(-(matrix @ query), 10)[:10], ms)
    print(summary("reference: numpy scan of all", ms))
    knn = knn_reference(store_path, rowids, matrix)
    ms = []
    for q, v in zip(queries, vectors, strict=True):
        timed(lambda v=v, user=q["user"]: knn(v, user), ms)
    print(summary("reference: vec0 KNN in a partition", ms))


def references(store: Store, model: str) -> tuple[list[int], np.ndarray]:
    from mempipe.adapters.store.sqlite import memory_sql

    table = memory_sql.vector_table("stm", model)
    rows = store._rows(f"SELECT memory_rowid, embedding FROM {table}")
    matrix = np.stack([np.frombuffer(blob, dtype=np.float32) for _, blob in rows])
    return [r for r, _ in rows], matrix


def knn_reference(store_path: Path, rowids: list[int], matrix: np.ndarray):
    import apsw
    import sqlite_vec

    from mempipe.adapters.store.sqlite.memory_sql import CHUNK_SIZE

    conn = apsw.Connection(str(store_path.with_suffix(".ref.db")))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    users = dict(
        apsw.Connection(str(store_path), flags=apsw.SQLITE_OPEN_READONLY)
        .execute("SELECT id, user_id FROM turns")
        .fetchall()
    )
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS ref USING vec0(id integer primary key, "
        f"user_id text partition key, embedding float[{matrix.shape[1]}] distance_metric=cosine, "
        f"chunk_size={CHUNK_SIZE})"
    )
    if not conn.execute("SELECT count(*) FROM ref").fetchall()[0][0]:
        with conn:
            conn.executemany(
                "INSERT INTO ref (id, user_id, embedding) VALUES (?, ?, ?)",
                [(r, users[r], matrix[i].tobytes()) for i, r in enumerate(rowids)],
            )

    def knn(vector: list[float], user: str) -> list:
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        return conn.execute(
            "SELECT id, distance FROM ref WHERE embedding MATCH ? AND k = 10 AND user_id = ?",
            (blob, user),
        ).fetchall()

    return knn


if __name__ == "__main__":
    main()
