"""How good the offline extractor's memories are on real conversation: precision (of what it
keeps, the share that is a well-formed statement, by the labels in
``bench/data/offline_extractor_labels.jsonl``) on sessions of the LongMemEval development set,
and recall of facts planted into those same sessions (one plainly worded sentence each, of the
kinds the extractor is for: preferences, plans, places, terms the user's team defines).

    python bench/offline_extractor.py [--skip 2600] [--sessions 400] [--sample 100]
                                      [--show-unlabelled]

The sessions are picked at random (seed 28). The rules were tuned on the first 2,600, looked at
in rounds (200, then 400 at a time); the default figures are on the 400 after them (``--skip``),
labelled before any rule was changed for them. ``--skip 0 --sessions 3000 --sample 1000``
measures every round at once.
Precision is over a seeded random sample of ``--sample`` kept memories (all of them when fewer);
a kept memory without a label is listed, and the figure is not final until it has one.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import time
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

from mempipe.adapters.llm.offline import NAME, OfflineExtractor
from mempipe.schemas.extraction import Extracted
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.transcript import SnapshotContent, TurnLine

DATA = Path(__file__).parents[1].parent / "shared" / "data" / "longmemeval-dev" / "turns.jsonl.gz"
LABELS = Path(__file__).parent / "data" / "offline_extractor_labels.jsonl"
TYPES = [MemoryType.SEMANTIC, MemoryType.EPISODIC, MemoryType.PROCEDURAL, MemoryType.TAXONOMIC]

# (kind, the sentence planted into a user turn, what the kept memory must say)
PLANTED = [
    (
        "preference",
        "I prefer aisle seats on short flights.",
        "prefers aisle seats on short flights",
    ),
    ("preference", "I always prefer green tea in the morning.", "prefers green tea in the morning"),
    ("preference", "I love hiking in the Dolomites.", "loves hiking in the Dolomites"),
    ("preference", "I hate early morning meetings.", "hates early morning meetings"),
    ("preference", "My favourite cuisine is Ethiopian.", "favourite cuisine is Ethiopian"),
    ("preference", "I avoid dairy products.", "avoids dairy products"),
    ("plan", "I'm planning to visit Kyoto in April.", "plans to visit Kyoto in April"),
    ("plan", "I plan to run the Berlin marathon next year.", "plans to run the Berlin marathon"),
    ("plan", "I'm going to start learning Portuguese.", "plans to start learning Portuguese"),
    ("plan", "I'm hoping to adopt a dog this summer.", "plans to adopt a dog this summer"),
    ("place", "I live in Denver.", "lives in Denver"),
    ("place", "I recently moved to Austin.", "lives in Austin"),
    ("place", "I am based in Berlin.", "lives in Berlin"),
    ("place", "I work at Globex.", "works at Globex"),
    ("place", "My home airport is SFO.", "home airport is SFO"),
    ("place", "My office is in Rotterdam.", "office is in Rotterdam"),
    ("term", "At work, 'red-eye' means a deploy that fails overnight.", "red-eye: a deploy that"),
    ("term", "In our team, LGTM means the review is approved.", "lgtm: the review is approved"),
    ("term", "SLO stands for service level objective.", "slo: service level objective"),
    ("term", "We call the Friday code freeze the quiet window.", "quiet window: the friday"),
    ("term", "On our team, a spike means a time-boxed investigation.", "spike: a time-boxed"),
    ("term", "P0 means drop everything and fix it now.", "p0: drop everything"),
]


def sessions(skip: int, count: int) -> list[SnapshotContent]:
    """``count`` sessions of the development set, picked at random (seed 28) after the first
    ``skip``, whole."""
    turns: dict[str, list[dict]] = defaultdict(list)
    with gzip.open(DATA, "rt") as lines:
        for line in lines:
            turn = json.loads(line)
            turns[turn["session_id"]].append(turn)
    picked = sorted(turns)
    random.Random(28).shuffle(picked)
    return [
        SnapshotContent(
            snapshot_id=sid,
            org_id="dev",
            project_id="lme",
            user_id=turns[sid][0]["user_id"],
            session_id=sid,
            turns=[
                TurnLine(
                    role=t["role"],
                    content=t["content"],
                    created_at=datetime.fromisoformat(t["created_at"].replace("Z", "+00:00")),
                )
                for t in turns[sid]
            ],
        )
        for sid in picked[skip : skip + count]
    ]


def planted(snapshot: SnapshotContent, sentence: str) -> SnapshotContent:
    """The session with ``sentence`` added to its first user turn, as a paragraph of its own."""
    first = next(i for i, t in enumerate(snapshot.turns) if t.role == "user")
    turns = list(snapshot.turns)
    turn = turns[first]
    turns[first] = turn.model_copy(update={"content": f"{turn.content.rstrip()}\n\n{sentence}"})
    return snapshot.model_copy(update={"turns": turns})


def said(memory: Extracted) -> str:
    """A kept memory as one line: what its label is keyed by."""
    data = memory.model_dump()
    if "term" in data:
        return f"{data['term']}: {data['definition']}"
    if "steps" in data:
        return f"{data['name']}: " + " | ".join(data["steps"])
    return data.get("text") or data["summary"]


def kept(extractor: OfflineExtractor, snapshot: SnapshotContent) -> list[tuple[str, str]]:
    return [
        (kind.value, said(memory)) for kind in TYPES for memory in extractor.extract(snapshot, kind)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip", type=int, default=2600)
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--sample", type=int, default=100)
    parser.add_argument("--show-unlabelled", action="store_true")
    args = parser.parse_args()
    extractor = OfflineExtractor()
    picked = sessions(args.skip, args.sessions)
    started = time.perf_counter()
    memories = [m for snapshot in picked for m in kept(extractor, snapshot)]
    took = time.perf_counter() - started
    turns = sum(len(s.turns) for s in picked)
    print(f"extractor {NAME}: {len(picked)} sessions, {turns} turns, {took:.2f} s")
    print(f"kept: {len(memories)} ({dict(Counter(kind for kind, _ in memories))})")

    labels = {}
    if LABELS.exists():
        for line in LABELS.read_text().splitlines():
            row = json.loads(line)
            labels[(row["type"], row["memory"])] = row["statement"]
    sample = sorted(memories)
    random.Random(28).shuffle(sample)
    sample = sample[: args.sample]
    judged = [labels[m] for m in sample if m in labels]
    unlabelled = [m for m in sample if m not in labels]
    if judged:
        print(
            f"precision: {sum(judged) / len(judged):.2f} "
            f"({sum(judged)} of {len(judged)} sampled memories are well-formed statements)"
        )
    if unlabelled:
        print(f"unlabelled: {len(unlabelled)} of the {len(sample)} sampled (not counted)")
        if args.show_unlabelled:
            for kind, memory in unlabelled:
                print(json.dumps({"type": kind, "memory": memory, "statement": None}))

    found: Counter[str] = Counter()
    for n, (kind, sentence, expected) in enumerate(PLANTED):
        snapshot = planted(picked[n % len(picked)], sentence)
        if any(expected.lower() in memory.lower() for _, memory in kept(extractor, snapshot)):
            found[kind] += 1
    planted_kinds = Counter(kind for kind, _, _ in PLANTED)
    print(
        f"recall of planted facts: {sum(found.values()) / len(PLANTED):.2f} "
        + ", ".join(f"{kind} {found[kind]}/{n}" for kind, n in planted_kinds.items())
    )


if __name__ == "__main__":
    main()
