"""Quantized vector indexes on real text: the user turns of a seeded sample of the LongMemEval
development set's questions (``../shared/data/longmemeval-dev/``), embedded once with
all-MiniLM-L6-v2, then the same vectors indexed as floats, bytes (``scalar``: sqlite-vec int8)
and bits (``binary``: sqlite-vec bit), each through the configuration and ``rebuild-indexes
--force`` as an operator would change it.

    python bench/quantization.py [--questions 40] [--seed 7] [--out bench/out/quantization]
        [--reuse]

For each quantization it prints recall@10 of the evidence turns (``mempipe eval``: semantic and
hybrid with each question searched within its own user, and semantic across every user), the
bytes the index's KNN reads per vector and in all, the store file's size (compacted), the
rebuild's time, and the p50 / p95 of a vector search within a user and across every user (by
sqlite-vec, and from the vectors held in memory), measured in-process on the questions' own
vectors. The float index is the reference each ratio is taken against, in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from embedding_sides import load_and_embed, mempipe, sample

STORE = "quantization.db"
QUANTIZATIONS = ("none", "scalar", "binary")


def run(*args: str, cwd: Path) -> dict:
    return mempipe(*args, cwd=cwd, store=STORE)


def sizes(out: Path) -> dict[str, float]:
    """Bytes of the full vectors, of the quantized copy (what a quantized KNN reads), and of
    the store file compacted."""
    from contextlib import closing

    from mempipe.adapters.store import open_store
    from mempipe.adapters.store.sqlite import memory_sql

    table = memory_sql.vector_table("stm", "all-MiniLM-L6-v2")
    compacted = out / "compacted.db"
    compacted.unlink(missing_ok=True)
    with closing(open_store(f"sqlite:///{out / STORE}", read_only=True)) as store:
        chunks = [
            name
            for (name,) in store._rows(
                "SELECT name FROM sqlite_master WHERE name LIKE ? ORDER BY name",
                (f"{table}_vector_chunks%",),
            )
        ]
        used = [store._rows(f"SELECT sum(length(vectors)) FROM {c}")[0][0] for c in chunks]
        count = store._rows(f"SELECT count(*) FROM {table}")[0][0]
        store._conn.execute(f"VACUUM INTO '{compacted}'")
    size = compacted.stat().st_size
    compacted.unlink()
    return {
        "vectors": count,
        "full": used[0],
        "scanned": used[-1],
        "file": size,
    }


def latencies(
    out: Path, queries: list[dict]
) -> tuple[dict[str, tuple[float, float]], dict[str, list[set[str]]]]:
    """p50 / p95 milliseconds of a 10-nearest vector search: within the question's user, across
    every user by sqlite-vec, and across every user from the held vectors; and what each
    search found."""
    from contextlib import closing

    from mempipe.adapters.embedding.local import LocalMiniLM
    from mempipe.adapters.store import open_store
    from mempipe.adapters.store.sqlite import vector_scan
    from mempipe.schemas.search import Near, ReadFilter

    vectors = LocalMiniLM().embed_query([q["query"] for q in queries])
    timed: dict[str, list[float]] = {"user": [], "all, sqlite-vec": [], "all, held": []}
    found: dict[str, list[set[str]]] = {name: [] for name in timed}
    for path, threshold in (("all, sqlite-vec", 1e9), ("all, held", 1e-12)):
        vector_scan.READ_SECONDS_PER_ROW = threshold
        with closing(open_store(f"sqlite:///{out / STORE}", read_only=True)) as store:
            for query, vector in zip(queries, vectors, strict=True):
                near = Near(vector=vector, model_id="all-MiniLM-L6-v2")
                scopes = [(path, ReadFilter())]
                if path == "all, sqlite-vec":
                    scopes.append(("user", ReadFilter(user_id=query["user_id"])))
                for name, scope in scopes:
                    for _ in range(2):  # sqlite-vec's first, then the held copy is read
                        store.search_vector("stm", near, scope, 10)
                    started = time.perf_counter()
                    hits = store.search_vector("stm", near, scope, 10)
                    timed[name].append((time.perf_counter() - started) * 1000)
                    found[name].append({hit.id for hit in hits})
    percentiles = {
        name: (statistics.median(ms), statistics.quantiles(ms, n=20)[18])
        for name, ms in timed.items()
    }
    return percentiles, found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("bench/out/quantization"))
    parser.add_argument(
        "--reuse", action="store_true", help="the store of the last run with the same sample"
    )
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    reuse = args.reuse and (out / STORE).exists()
    for old in [*([] if reuse else out.glob(f"{STORE}*")), out / "project-config.yaml"]:
        old.unlink(missing_ok=True)
    questions, texts = sample(out, args.questions, args.seed)
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    (out / "queries-all-users.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in q.items() if k != "user_id"}) + "\n" for q in queries)
    )
    print(f"{questions} questions, {len(texts)} user turns")
    if not reuse:
        load_and_embed(out, STORE)

    rows = {}
    for quantization in QUANTIZATIONS:
        (out / "project-config.yaml").write_text(
            f"memory:\n  vector_index:\n    quantization: {quantization}\n"
        )
        drift = run("rebuild-indexes", cwd=out)["drift"]
        rebuilt = run("rebuild-indexes", "--force", cwd=out)
        recall = {
            mode: run(
                "eval", "queries.jsonl", "--source", "stm", "--mode", mode, "--k", "10", cwd=out
            )["recall"]
            for mode in ("semantic", "hybrid")
        }
        recall["all users"] = run(
            "eval",
            "queries-all-users.jsonl",
            "--source",
            "stm",
            "--mode",
            "semantic",
            "--k",
            "10",
            cwd=out,
        )["recall"]
        rows[quantization] = {
            "drift": drift,
            "rebuild_s": rebuilt["_seconds"] if rebuilt["rebuilt"] else 0.0,
            "recall": recall,
            "sizes": sizes(out),
        }
        rows[quantization]["ms"], rows[quantization]["found"] = latencies(out, queries)

    print(
        f"\n{'':<8} {'drift':>5} {'rebuild':>8} {'semantic':>9} {'hybrid':>7} {'all users':>9} "
        f"{'KNN B/vec':>9} {'KNN MB':>7} {'file MB':>8} {'user p50/p95':>13} "
        f"{'all sqlite-vec':>15} {'all held':>13}"
    )
    for quantization, row in rows.items():
        s, r = row["sizes"], row["recall"]
        print(
            f"{quantization:<8} {row['drift']:>5} {row['rebuild_s']:>7.1f}s {r['semantic']:>9.3f} "
            f"{r['hybrid']:>7.3f} {r['all users']:>9.3f} {s['scanned'] / s['vectors']:>9.0f} "
            f"{s['scanned'] / 1e6:>7.2f} {s['file'] / 1e6:>8.1f} "
            + " ".join(f"{p50:>6.2f}/{p95:<6.2f}" for p50, p95 in row["ms"].values())
        )
    base = rows["none"]
    for quantization in ("scalar", "binary"):
        row = rows[quantization]
        same = {
            name: statistics.mean(
                len(a & b) / max(len(b), 1) for a, b in zip(row["found"][name], exact, strict=True)
            )
            for name, exact in base["found"].items()
        }
        print(
            f"{quantization}: share of the float index's 10 nearest found, "
            + ", ".join(f"{name} {share:.3f}" for name, share in same.items())
        )
        recall = {name: row["recall"][name] / base["recall"][name] for name in base["recall"]}
        print(
            f"{quantization} vs none: recall {recall['semantic']:.3f}x "
            f"(all users {recall['all users']:.3f}x), "
            f"KNN bytes {row['sizes']['scanned'] / base['sizes']['scanned']:.3f}x, "
            f"file {row['sizes']['file'] / base['sizes']['file']:.3f}x, "
            "latency p50 "
            + ", ".join(
                f"{name} {row['ms'][name][0] / base['ms'][name][0]:.2f}x" for name in base["ms"]
            )
        )


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    main()
