"""A bridge between two embedding models, measured on the LongMemEval development set (issue
57): can the new model's queries search the old model's vectors through a small map fitted on
pairs of the two models' vectors of the same texts, and keep the old model's recall?

    python bench/bridge.py --store sqlite:///e5.db --old all-MiniLM-L6-v2 \
        --new multilingual-e5-small [--pairs 500,2000,10000] [--query-side 500,2000] \
        [--queries FILE] [--seed 0]

The store holds both models' vectors of every turn (a move's store before ``finalize``: the
previous model's and the serving one's). Each question is searched within its own user, as
``mempipe eval`` does, by exact cosine in numpy: recall@10 of the old model (its queries over its
vectors), of the full move (the new model's queries over its vectors), and of the bridge (the
new model's queries mapped into the old space, over the old vectors), for each kind of map and
number of pairs, with the map's added cost a query.

Maps (Drift-Adapter, Vejendla 2025): ``affine``, mempipe's own (:mod:`mempipe.domain.bridge`:
ridge least squares on unit vectors, with its ``RIDGE`` and with others); ``procrustes``, the
orthogonal map closest to the pairs. Each is fitted on the new model's stored (document-side)
vectors; ``--query-side`` also fits mempipe's map on the new model's query-side vectors of the
same texts, as ``reembed bridge`` does (for a model with two sides: E5), at those sizes.
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


def residual_mlp(contrastive: bool, hidden: int = 256, epochs: int = 400, seed: int = 0):
    """Drift-Adapter's third map: mempipe's affine map plus a small MLP on its residual
    (``q -> unit(A q + MLP(q))``, the MLP's last layer starting at zero, so training starts from
    the affine fit), trained full-batch with AdamW on the pairs: by the mean cosine to the
    stored vector, or ``contrastive`` (InfoNCE over the pairs, each stored vector the others'
    negative, temperature 0.05), a loss that ranks as search does."""

    def fit(new: np.ndarray, old: np.ndarray):
        import torch

        from mempipe.domain import bridge

        torch.manual_seed(seed)
        weights = torch.tensor(bridge.fit_affine(new, old))
        source = torch.tensor(unit(new), dtype=torch.float32)
        target = torch.tensor(unit(old), dtype=torch.float32)
        layers = torch.nn.Sequential(
            torch.nn.Linear(source.shape[1], hidden),
            torch.nn.GELU(),
            torch.nn.Linear(hidden, target.shape[1]),
        )
        torch.nn.init.zeros_(layers[2].weight)
        torch.nn.init.zeros_(layers[2].bias)
        linear = torch.nn.Parameter(weights.clone())
        optimizer = torch.optim.AdamW([*layers.parameters(), linear], lr=1e-3, weight_decay=1e-2)

        def forward(x: torch.Tensor) -> torch.Tensor:
            affine = torch.hstack([x, torch.ones(len(x), 1)]) @ linear
            return torch.nn.functional.normalize(affine + layers(x), dim=1)

        for _ in range(epochs):
            optimizer.zero_grad()
            mapped = forward(source)
            if contrastive:
                logits = mapped @ target.T / 0.05
                loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(source)))
            else:
                loss = 1 - (mapped * target).sum(dim=1).mean()
            loss.backward()
            optimizer.step()

        def mapped(q: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return forward(torch.tensor(unit(q), dtype=torch.float32)).numpy()

        return mapped

    return fit


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
    from mempipe.domain import bridge

    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--pairs", default="500,2000,10000")
    parser.add_argument("--query-side", default="")
    parser.add_argument("--queries", default=str(DATA / "queries.jsonl"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mlp", action="store_true", help="also the residual MLP maps (torch)")
    args = parser.parse_args()
    db = apsw.Connection(args.store.removeprefix("sqlite:///"), flags=apsw.SQLITE_OPEN_READONLY)
    import sqlite_vec

    db.enable_load_extension(True)
    db.load_extension(sqlite_vec.loadable_path())
    rows = db.execute("SELECT id, user_id, message_id, content FROM turns ORDER BY id").fetchall()
    old_by_row, new_by_row = vectors(db, args.old), vectors(db, args.new)
    rows = [r for r in rows if r[0] in old_by_row and r[0] in new_by_row]
    old = unit(np.stack([old_by_row[r[0]] for r in rows]))
    new = unit(np.stack([new_by_row[r[0]] for r in rows]))
    users = np.array([r[1] for r in rows])
    ids = np.array([r[2] for r in rows])
    queries = [orjson.loads(line) for line in Path(args.queries).read_bytes().splitlines()]
    texts = [q["query"] for q in queries]
    new_model = embedder_for(args.new)
    old_q = np.asarray(embedder_for(args.old).embed_query(texts), dtype=np.float64)
    new_q = np.asarray(new_model.embed_query(texts), dtype=np.float64)
    print(f"{len(rows):,} turns with both models' vectors; {len(queries)} questions, recall@{K}")
    base = recall(queries, old_q, old, users, ids)
    full = recall(queries, new_q, new, users, ids)
    print(f"old model ({args.old}): {base:.3f}")
    print(f"full move ({args.new}): {full:.3f} ({full / base:.3f} of the old model's)")
    draw = np.random.default_rng(args.seed)
    order = draw.permutation(len(rows))
    kinds = {
        f"affine, ridge {bridge.RIDGE} (mempipe)": lambda n, o: _mapped(bridge.fit_affine(n, o)),
        "affine, ridge 0.01": lambda n, o: _mapped(bridge.fit_affine(n, o, ridge=0.01)),
        "affine, ridge 1": lambda n, o: _mapped(bridge.fit_affine(n, o, ridge=1.0)),
    }
    if old.shape[1] == new.shape[1]:
        kinds["procrustes"] = procrustes
    if args.mlp:
        kinds["residual MLP, cosine loss"] = residual_mlp(contrastive=False)
        kinds["residual MLP, contrastive loss"] = residual_mlp(contrastive=True)
    results: dict[str, list[str]] = defaultdict(list)

    def measure(name: str, fit, source: np.ndarray, chosen: np.ndarray, pairs: int) -> None:
        started = time.perf_counter()
        mapped = fit(source.astype(np.float64), old[chosen].astype(np.float64))
        fitted = time.perf_counter() - started
        started = time.perf_counter()
        bridged_q = mapped(new_q)
        per_query = (time.perf_counter() - started) / len(queries) * 1e6
        bridged = recall(queries, bridged_q, old, users, ids)
        results[name].append(
            f"{pairs:>6,} pairs: {bridged:.3f} ({bridged / base:.3f} of the old model's), "
            f"fitted in {fitted:.2f} s, {per_query:.1f} µs a query"
        )

    for pairs in (int(p) for p in args.pairs.split(",")):
        chosen = order[: min(pairs, len(rows))]
        for name, fit in kinds.items():
            measure(name, fit, new[chosen], chosen, len(chosen))
        cosine = bridge.held_out_cosine(new[chosen], old[chosen])
        results["the fit's held-out cosine (what reembed bridge reports)"].append(
            f"{len(chosen):>6,} pairs: {cosine:.3f}"
        )
    for pairs in (int(p) for p in args.query_side.split(",") if p):
        chosen = order[: min(pairs, len(rows))]
        started = time.perf_counter()
        sides = np.asarray(new_model.embed_query([rows[i][3] for i in chosen]), dtype=np.float64)
        print(
            f"{len(chosen):,} texts embedded on {args.new}'s query side in "
            f"{time.perf_counter() - started:.1f} s"
        )
        measure(
            f"affine, ridge {bridge.RIDGE}, fitted on the query side (reembed bridge)",
            lambda n, o: _mapped(bridge.fit_affine(n, o)),
            sides,
            chosen,
            len(chosen),
        )
        if args.mlp:
            for loss in (False, True):
                measure(
                    f"residual MLP, {'contrastive' if loss else 'cosine'} loss, query side",
                    residual_mlp(contrastive=loss),
                    sides,
                    chosen,
                    len(chosen),
                )
    for name, lines in results.items():
        print(f"bridge, {name}:")
        for line in lines:
            print(f"  {line}")


def _mapped(weights: np.ndarray):
    from mempipe.domain import bridge

    return lambda q: bridge.apply_map(weights, q)


if __name__ == "__main__":
    main()
