"""Replay's time against the time its embedding model alone takes for the same texts, in the
same run: seconds against seconds, each a first asking.

    python bench/replay.py [--sessions 300] [--concurrency 2] [--model all-MiniLM-L6-v2]

Builds a synthetic archive of short sessions in which users state facts, change them, report
events and ask for definitions; backfills and promotes it (not timed); then times the `replay`
flow end to end (extract with all four handlers, embed, reconcile, write, audit), the model
loaded inside the timed run as `mempipe replay` loads it. The reference is a fresh process that
loads the same model and encodes exactly the batches the replay asked its model for, in the same
order: what the model alone needs for this work (the replay's asks are recorded as they pass).
The ratio is the reference's seconds over the replay's; the rest of the replay's time is
extraction, reconciliation, the store's writes and the run's bookkeeping.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mempipe.adapters.store.unit_of_work import UnitOfWork

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

AIRPORTS = ["JFK", "LIS", "CDG", "NRT", "SFO", "MAD", "BER", "OSL"]
CITIES = ["Lisbon", "Madrid", "Oslo", "Berlin", "Paris", "Tokyo"]
NAMES = ["Priya", "Tomas", "Ana", "Kenji", "Lea", "Omar"]
REFERENCE = """
import json, sys, time
started = time.perf_counter()
from mempipe.adapters.embedding import embedder_for
batches = json.loads(open(sys.argv[2]).read())
embedder = embedder_for(sys.argv[1])
for batch in batches:
    embedder.embed(batch)
print(time.perf_counter() - started)
"""
"""The reference, in a process of its own: the model loaded and asked for the first time."""

TERMS = [
    ("canary", "a small release watched before the full rollout"),
    ("layover", "a stop between two flights of one journey"),
    ("runbook", "a written procedure for an operational task"),
]


def write_archive(path: Path, sessions: int) -> None:
    rng = random.Random(11)
    with path.open("w") as out:
        for number in range(sessions):
            user = f"user-{number % max(1, sessions // 3)}"
            term, definition = rng.choice(TERMS)
            lines = [
                ("user", f"My home airport is {rng.choice(AIRPORTS)}."),
                ("assistant", "Noted."),
                ("user", f"I live in {rng.choice(CITIES)} and I prefer a window seat."),
                ("assistant", "Got it."),
                ("user", f"I met {rng.choice(NAMES)} from logistics yesterday."),
                ("assistant", "Good to hear."),
                ("user", f"What is a {term}?"),
                ("assistant", f"A {term} is {definition}."),
            ]
            for seq, (role, content) in enumerate(lines):
                minute = number * 10 + seq
                record = {
                    "session_id": f"s{number}",
                    "user_id": user,
                    "turn_seq": seq,
                    "role": role,
                    "content": content,
                    "created_at": f"2024-01-{1 + minute // 1440:02d}T"
                    f"{minute % 1440 // 60:02d}:{minute % 60:02d}:00Z",
                }
                out.write(json.dumps(record) + "\n")


def recorded_asks(model: str) -> list[list[str]]:
    """Every batch of texts the model's embedder is asked for from now on in this process, in
    order (its class's ``embed`` wrapped)."""
    from mempipe.adapters.embedding import embedder_for

    kind = type(embedder_for(model))
    asked: list[list[str]] = []
    embed = kind.embed

    def recording(self: object, texts: list[str]) -> object:
        asked.append(list(texts))
        return embed(self, texts)

    kind.embed = recording  # type: ignore[method-assign]
    return asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    args = parser.parse_args()

    from mempipe.adapters.store import open_store
    from mempipe.cli.flow_runs import reporting_to_prefect
    from mempipe.flows.replay import replay_flow
    from mempipe.schemas.archive import ArchiveFormat, IngestRequest
    from mempipe.schemas.config import PromotionLimits
    from mempipe.schemas.identity import IdentityDefaults
    from mempipe.services.backfill.ingest import ingest_file
    from mempipe.services.promote import promote_sessions

    work = Path(tempfile.mkdtemp(prefix="mempipe-replay-bench-"))
    archive, store_url = work / "archive.jsonl", f"sqlite:///{work / 'memory.db'}"
    config = work / "project-config.yaml"
    config.write_text(f"memory:\n  embedding:\n    model: {args.model}\n")
    write_archive(archive, args.sessions)
    store = open_store(store_url, migrate=True)
    ingest_file(
        UnitOfWork(store),
        IngestRequest(
            path=archive,
            format=ArchiveFormat.TURNS,
            defaults=IdentityDefaults(org_id="b", project_id="b"),
            run_id="bench",
            rejects_file=work / "rejects.jsonl",
        ),
    )
    handlers = ["semantic", "episodic", "procedural", "taxonomic"]
    promoted = promote_sessions(UnitOfWork(store), PromotionLimits(), handlers, run_id="bench")
    store.close()

    from mempipe.flows.migrate import migrate_flow

    migrate_flow(store=store_url, config=str(config))

    asked = recorded_asks(args.model)
    # as `mempipe replay` runs it: among others, without Prefect's flow-run heartbeat, whose
    # thread the engine waits up to a second for as a run ends
    with reporting_to_prefect():
        started = time.perf_counter()
        summary = replay_flow(
            store=store_url,
            config=str(config),
            audit_dir=str(work / "audit"),
            concurrency=args.concurrency,
        )
        seconds = time.perf_counter() - started

    stored = work / "asked.json"
    stored.write_text(json.dumps(asked))
    texts = sum(len(batch) for batch in asked)
    reference = float(
        subprocess.run(
            [sys.executable, "-c", REFERENCE, args.model, str(stored)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()[-1]
    )

    snapshots_rate = summary.snapshots / seconds
    memories_rate = summary.memories_extracted / seconds
    print(
        f"snapshots: {promoted.snapshots_created:,}; extractions: {summary.extractions:,}; "
        f"memories extracted: {summary.memories_extracted:,} "
        f"({summary.added} added, {summary.updated} updated, {summary.reinforced} reinforced)"
    )
    print(
        f"replay flow ({args.model}, offline extractor, concurrency {args.concurrency}): "
        f"{snapshots_rate:,.1f} snapshots/s, {memories_rate:,.1f} memories/s ({seconds:.2f} s)"
    )
    print(
        f"reference ({args.model} loaded in a fresh process, encoding the {texts:,} texts "
        f"the replay asked it for, in its {len(asked):,} batches): {reference:.2f} s"
    )
    print(
        f"ratio, the model's seconds / the replay's for the same {texts:,} texts: "
        f"{reference / seconds:.2f}"
    )


if __name__ == "__main__":
    main()
