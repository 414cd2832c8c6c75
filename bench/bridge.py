"""A bridge between two embedding models, measured on the LongMemEval development set (issue
57): can the new model's queries search the old model's vectors through a small map fitted on
pairs of the two models' vectors of the same texts, and keep the old model's recall?

    python bench/bridge.py --store sqlite:///e5.db --old all-MiniLM-L6-v2 \
        --new multilingual-e5-small [--pairs 500,2000,10000] [--seed 0]

The store holds both models' vectors of every turn (a move's store before ``finalize``: the
previous model's and the serving one's). Each question is searched within its own user, as
``mempipe eval`` does, by exact cosine in numpy: recall@10 of the old model (its queries over its
vectors), of the full move (the new model's queries over its vectors), and of the bridge (the
new model's queries mapped into the old space, over the old vectors), for each kind of map and
number of pairs, with the map's added cost a query.

Maps (Drift-Adapter, Vejendla 2025): ``procrustes``, the orthogonal map closest to the pairs
(both sides centred and unit length; the old side's mean added back); ``affine``, least squares
with a small ridge (a full linear map and an offset).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import apsw
import numpy as np
import orjson

DATA = Path(__file__).parents[2] / "shared" / "data" / "longmemeval-dev"
K = 10


def vectors(db: apsw.Connection, model: str) -> dict[int, np.ndarray]:
    from mempipe.adapters.store.sqlite.memory_sql import vector_table

    table = vector_table("stm", model)
    return {
        rowid: np.frombuffer(blob, dtype=np.float32)
        for rowid, blob in db.execute(f"SELECT memory_rowid, embedding FROM {table}")
    }


def unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def procrustes(new: np.ndarray, old: np.ndarray):
    """The orthogonal map of the centred, unit pairs; needs the two sizes equal."""
    new_mean, old_mean = new.mean(axis=0), old.mean(axis=0)
    u, _, vt = np.linalg.svd(unit(new - new_mean).T @ unit(old - old_mean))
    rotation = u @ vt
    return lambda q: (unit(q - new_mean) @ rotation) + old_mean


def affine(new: np.ndarray, old: np.ndarray, ridge: float = 1e-2):
    """Least squares ``old ≈ new · W + b`` with a small ridge."""
    design = np.hstack([new, np.ones((len(new), 1))])
    gram = design.T @ design + ridge * np.eye(design.shape[1])
    weights = np.linalg.solve(gram, design.T @ old)
    return lambda q: np.hstack([q, np.ones((len(q), 1))]) @ weights


def recall(
    queries: list[dict],
    query_vectors: np.ndarray,
    docs: np.ndarray,
    users: np.ndarray,
    ids: np.ndarray,
) -> float:
    found = []
    for query, vector in zip(queries, unit(query_vectors), strict=True):
        scope = np.nonzero(users == query["user_id"])[0]
        top = scope[np.argsort(-(docs[scope] @ vector), kind="stable")[:K]]
        relevant = set(query["relevant_ids"])
        found.append(len(relevant & set(ids[top])) / len(relevant))
    return float(np.mean(found))


def main() -> None:
    from mempipe.adapters.embedding import embedder_for

    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--pairs", default="500,2000,10000")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    db = apsw.Connection(args.store.removeprefix("sqlite:///"), flags=apsw.SQLITE_OPEN_READONLY)
    import sqlite_vec

    db.enable_load_extension(True)
    db.load_extension(sqlite_vec.loadable_path())
    rows = db.execute("SELECT id, user_id, message_id FROM turns ORDER BY id").fetchall()
    old_by_row, new_by_row = vectors(db, args.old), vectors(db, args.new)
    rows = [r for r in rows if r[0] in old_by_row and r[0] in new_by_row]
    old = unit(np.stack([old_by_row[r[0]] for r in rows]))
    new = unit(np.stack([new_by_row[r[0]] for r in rows]))
    users = np.array([r[1] for r in rows])
    ids = np.array([r[2] for r in rows])
    queries = [orjson.loads(line) for line in (DATA / "queries.jsonl").read_bytes().splitlines()]
    texts = [q["query"] for q in queries]
    old_q = np.asarray(embedder_for(args.old).embed_query(texts), dtype=np.float64)
    new_q = np.asarray(embedder_for(args.new).embed_query(texts), dtype=np.float64)
    print(f"{len(rows):,} turns with both models' vectors; {len(queries)} questions, recall@{K}")
    base = recall(queries, old_q, old, users, ids)
    full = recall(queries, new_q, new, users, ids)
    print(f"old model ({args.old}): {base:.3f}")
    print(f"full move ({args.new}): {full:.3f}")
    draw = np.random.default_rng(args.seed)
    kinds = {"affine": affine}
    if old.shape[1] == new.shape[1]:
        kinds["procrustes"] = procrustes
    results: dict[str, list[str]] = defaultdict(list)
    for pairs in (int(p) for p in args.pairs.split(",")):
        chosen = draw.choice(len(rows), size=min(pairs, len(rows)), replace=False)
        for name, fit in kinds.items():
            started = time.perf_counter()
            mapped = fit(new[chosen].astype(np.float64), old[chosen].astype(np.float64))
            fitted = time.perf_counter() - started
            started = time.perf_counter()
            bridged_q = mapped(new_q)
            per_query = (time.perf_counter() - started) / len(queries) * 1e6
            bridged = recall(queries, bridged_q, old, users, ids)
            results[name].append(
                f"{pairs:>6,} pairs: {bridged:.3f} ({bridged / base:.3f} of the old model's), "
                f"fitted in {fitted:.2f} s, {per_query:.1f} µs a query"
            )
    for name, lines in results.items():
        print(f"bridge, {name}:")
        for line in lines:
            print(f"  {line}")


if __name__ == "__main__":
    main()
