"""A cold search as ops run it: one whole ``mempipe search`` process per query, on a store of
real turns embedded with the local model, against ``mempipe stats`` of the same store (the same
interpreter, imports and store open) measured in the same run.

    python bench/cold_search.py [--turns 5882] [--runs 5]

The store is built once under ``bench/out/cold-search`` (the first LongMemEval turns, embedded by
``mempipe backfill --embed``); later runs reuse it.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import orjson
import processes  # noqa: F401 (times processes as installed)

DATA = Path(__file__).parents[2] / "shared" / "data" / "longmemeval-dev"
OUT = Path(__file__).parent / "out" / "cold-search"
QUERIES = ("where did I buy my vintage camera", "my sister's wedding plans", "a lentil recipe")


def mempipe(*args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mempipe", *args], check=True, capture_output=True)
    return time.perf_counter() - started


def build(store: Path, turns: int) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    archive = OUT / "turns.jsonl"
    with gzip.open(DATA / "turns.jsonl.gz") as lines, archive.open("wb") as out:
        for n, line in enumerate(lines):
            if n == turns:
                break
            out.write(orjson.dumps(orjson.loads(line)) + b"\n")
    mempipe("backfill", str(archive), "--embed", "--store", f"sqlite:///{store}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=5882)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    store = OUT / f"store-{args.turns}.db"
    if not store.exists():
        build(store, args.turns)
    url = ["--store", f"sqlite:///{store}"]
    stats = [mempipe("stats", *url) for _ in range(args.runs)]
    reference = statistics.median(stats)
    print(f"store: {args.turns:,} embedded turns; reference: mempipe stats {reference:.2f} s")
    for mode in ("text", "semantic", "hybrid"):
        times = [
            mempipe("search", QUERIES[n % len(QUERIES)], "--source", "stm", "--mode", mode, *url)
            for n in range(args.runs)
        ]
        median = statistics.median(times)
        print(f"search --mode {mode:8} median {median:5.2f} s  {median / reference:4.1f}x stats")


if __name__ == "__main__":
    main()
