"""The local model's first texts: what a process pays to embed N real turns with all-MiniLM-L6-v2,
through mempipe's local embedder (numpy first, sentence-transformers once the process has encoded
its budget of tokens), against the least of the two ways measured in the same run: numpy alone,
and loading sentence-transformers then encoding with it.

    python bench/local_model.py [--texts 50,200,800,2000]

Each size runs in a fresh interpreter, so that every way pays its own loads, as a command does.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parents[2] / "shared" / "data" / "longmemeval-dev" / "turns.jsonl.gz"

ONE_SIZE = """
import gzip, json, sys, time
count, way = int(sys.argv[1]), sys.argv[2]
texts = []
with gzip.open(sys.argv[3], "rt") as lines:
    for line in lines:
        texts.append(json.loads(line)["content"])
        if len(texts) == count:
            break
started = time.perf_counter()
from mempipe.adapters.embedding import local
if way == "mempipe":
    embedder = local.LocalMiniLM()
    for start in range(0, len(texts), 64):
        embedder.embed(texts[start : start + 64])
elif way == "numpy":
    local._numpy_encoder().encode(texts)
else:
    local._load().encode(texts, batch_size=64, normalize_embeddings=True)
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "torch": local.MODEL_ID in local._models}))
"""


def measured(count: int, way: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", ONE_SIZE, str(count), way, str(DATA)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", default="50,200,800,2000")
    sizes = [int(size) for size in parser.parse_args().texts.split(",")]
    print(f"{'texts':>6} {'mempipe':>9} {'numpy':>9} {'s-t':>9} {'least':>9} {'ratio':>6}  torch")
    for count in sizes:
        ours = measured(count, "mempipe")
        numpy_only = measured(count, "numpy")["seconds"]
        torch_only = measured(count, "torch")["seconds"]
        least = min(numpy_only, torch_only)
        print(
            f"{count:>6} {ours['seconds']:>8.1f}s {numpy_only:>8.1f}s {torch_only:>8.1f}s "
            f"{least:>8.1f}s {ours['seconds'] / least:>5.2f}x  {ours['torch']}"
        )


if __name__ == "__main__":
    main()
