"""Retention on the LongMemEval development set (issue 58), through the commands a user runs.

    python bench/forget_devset.py WORK [--as-of 2023-06-01]

In ``WORK``: the dev set's turns backfilled and replayed offline (hashing-256: the offline
extractor's memories need no model), then a policy (turns 30 days after they were said,
semantic memories not confirmed for 180 days, at most 2 episodic memories a user, one
superseded version kept, the first question's user pinned) applied as of ``--as-of`` (the
dev set runs from May 2021 to December 2023, so "now" would forget every turn):

* ``forget --plan --json`` beside ``forget --json`` at the same instant: the counts per user,
  collection and rule, and the FORGET audit rows, compared record for record;
* 40 turns the policy forgets, each searched by its own text (text mode, within its user, top
  10) with the policy in force before the run (expiry at read), after it, and, before, with
  no policy (that the search would find them otherwise);
* ``replay --force`` afterwards: what it adds.

Prints the figures and the commands' times; a check, not a benchmark.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import apsw

DATA = Path(__file__).parents[2] / "shared" / "data" / "longmemeval-dev"
POLICY = """  retention:
    turns: {{max_age: 30d}}
    semantic: {{max_age: 180d}}
    episodic: {{max_per_user: 2}}
    keep_versions: 1
    pinned_users: [{pinned}]
"""


def mempipe(work: Path, *args: str) -> tuple[str, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "mempipe"), *args, "--store", "sqlite:///dev.db"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"mempipe {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout, took


def rows(work: Path, query: str, values: tuple = ()) -> list[tuple]:
    db = apsw.Connection(str(work / "dev.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return db.execute(query, values).fetchall()
    finally:
        db.close()


def found(work: Path, text: str, user: str, turn: str) -> bool:
    out, _ = mempipe(
        work,
        "search",
        text[:300],
        "--source",
        "stm",
        "--mode",
        "text",
        "--user-id",
        user,
        "--top-k",
        "10",
        "--json",
    )
    return turn in {h["id"] for h in json.loads(out)["hits"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--as-of", default="2023-06-01")
    args = parser.parse_args()
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    config = work / "project-config.yaml"
    config.write_text("memory:\n  embedding:\n    model: hashing-256\n")
    if (work / "replayed.db").exists():
        shutil.copy(work / "replayed.db", work / "dev.db")
    else:
        _, took = mempipe(work, "backfill", str(DATA / "turns.jsonl.gz"), "--format", "turns")
        print(f"backfill: {took:.1f} s")
        _, took = mempipe(work, "replay")
        print(f"replay: {took:.1f} s")
        shutil.copy(work / "dev.db", work / "replayed.db")
    pinned = json.loads((DATA / "queries.jsonl").read_text().splitlines()[0])["user_id"]
    policy = POLICY.format(pinned=pinned)
    cutoff = rows(work, "SELECT strftime('%Y-%m-%dT%H:%M:%f', ?, '-30 days')", (args.as_of,))
    sample = rows(
        work,
        "SELECT t.session_id || '#' || t.turn_seq, t.user_id, t.content FROM turns t "
        "WHERE t.created_at < ? AND t.user_id != ? AND length(t.content) > 80 "
        "ORDER BY t.id % 997, t.id LIMIT 40",
        (cutoff[0][0], pinned),
    )
    unpolicied = sum(found(work, text, user, turn) for turn, user, text in sample)
    config.write_text(config.read_text() + policy)
    plan_out, plan_s = mempipe(work, "forget", "--plan", "--as-of", args.as_of, "--json")
    before = sum(found(work, text, user, turn) for turn, user, text in sample)
    run_out, run_s = mempipe(work, "forget", "--as-of", args.as_of, "--json")
    after = sum(found(work, text, user, turn) for turn, user, text in sample)
    plan, ran = json.loads(plan_out), json.loads(run_out)
    counted = Counter(
        {(c["user_id"], c["collection"], c["rule"]): c["records"] for c in plan["counts"]}
    )
    done = Counter(
        {(c["user_id"], c["collection"], c["rule"]): c["records"] for c in ran["counts"]}
    )
    audited = Counter(
        {
            (u, t, r): n
            for u, t, r, n in rows(
                work,
                "SELECT user_id, memory_type, rule, count(*) FROM audit WHERE action = 'FORGET' "
                "GROUP BY 1, 2, 3",
            )
        }
    )
    print(f"policy as of {args.as_of}, {pinned} pinned:\n{policy}")
    print(f"forget --plan: {plan['forgotten']} records in {plan_s:.1f} s")
    print(f"forget: {ran['forgotten']} records in {run_s:.1f} s")
    print(f"plan == run per user, collection and rule: {counted == done} ({len(done)} groups)")
    print(f"run == FORGET audit rows: {done == audited}")
    by_rule: Counter[tuple[str, str]] = Counter()
    for (_, collection, rule), n in done.items():
        by_rule[collection, rule] += n
    for (collection, rule), n in sorted(by_rule.items()):
        print(f"  {collection:<10} {rule:<22} {n:>7}")
    texts = rows(work, "SELECT count(*) FROM audit WHERE action = 'FORGET' AND text != ''")
    print(f"FORGET rows with text: {texts[0][0]}")
    print(f"pinned user's FORGET rows: {sum(n for (u, _, _), n in done.items() if u == pinned)}")
    print(
        f"{len(sample)} forgotten turns searched by their own text: found {unpolicied} without "
        f"the policy, {before} with it before the run, {after} after it"
    )
    replayed, took = mempipe(work, "replay", "--force", "--json")
    print(f"replay --force afterwards: added {json.loads(replayed)['added']} ({took:.1f} s)")


if __name__ == "__main__":
    main()
