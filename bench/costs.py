"""What a plan costs to make, and what the README's worked plans come to, on real text.

    python bench/costs.py

The LongMemEval development set (39,524 real turns) is backfilled and replayed offline
(hashing-256 vectors; not timed) into a store under a temporary folder. Then, timed:

* ``reembed --plan`` of every collection to ``openai:text-embedding-3-small`` (the plan reads
  every record and counts its tokens with cl100k_base); reference: bpe-openai encoding the
  same texts, read beforehand, in the same run;
* ``replay --plan --force --extractor openai`` with gpt-4o-mini (every extraction's request
  built and counted with o200k_base, and each snapshot's summary); reference: encoding the
  same prompts.

Last, the worked plans of the README's "Costs" section: 1,000,000 memories re-embedded and
100,000 snapshots replayed, at this corpus's measured tokens per memory and per snapshot,
priced by the default price table, timed at example budgets.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mempipe.schemas.work import WorkQuery

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("MEMPIPE_SERVER_MODE", "temporary")

DATA = Path(__file__).parents[1].parent / "shared" / "data" / "longmemeval-dev" / "turns.jsonl.gz"
EMBEDDING = "openai:text-embedding-3-small"
CHAT = "gpt-4o-mini"
BUDGETS = {EMBEDDING: (3_000, 1_000_000), CHAT: (500, 200_000)}
"""Example budgets (requests, tokens per minute) the live durations are timed at."""


def mempipe(*args: str, cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mempipe", *args], cwd=cwd, capture_output=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr.decode())


def build(work: Path) -> str:
    (work / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-256\n")
    store = f"sqlite:///{work / 'lme.db'}"
    mempipe("backfill", str(DATA), "--store", store, cwd=work)
    mempipe("replay", "--store", store, "--concurrency", "2", cwd=work)
    return store


def timed(label: str, run, reference) -> None:
    started = time.perf_counter()
    plan = run()
    took = time.perf_counter() - started
    started = time.perf_counter()
    ref_tokens = reference()
    ref_took = time.perf_counter() - started
    items = sum(line.items for line in plan.lines if line.purpose != "probe")
    print(
        f"{label}: {items:,} items, {plan.input_tokens:,} tokens in {took:.2f} s "
        f"({items / took:,.0f} items/s, {plan.input_tokens / took:,.0f} tokens/s); "
        f"reference encode {ref_tokens:,} tokens in {ref_took:.2f} s "
        f"({ref_tokens / ref_took:,.0f} tokens/s); ratio {ref_took / took:.2f}"
    )
    return plan


def main() -> None:
    import bpe_openai

    from mempipe.adapters.llm.openai_compat import (
        extraction_messages,
        summary_messages,
    )
    from mempipe.adapters.store import open_store
    from mempipe.adapters.store.unit_of_work import UnitOfWork
    from mempipe.domain.costs import plan_cost, plan_duration
    from mempipe.schemas.batch import BatchLimits
    from mempipe.schemas.costs import CostConfig, PlanLine
    from mempipe.schemas.embedding import COLLECTIONS
    from mempipe.schemas.memory import MemoryType
    from mempipe.schemas.replay import LLMSettings
    from mempipe.schemas.selection import SnapshotSelection
    from mempipe.services.reembed.plan import reembed_plan
    from mempipe.services.replay.plan import replay_plan

    costs, limits, llm = CostConfig(), BatchLimits(), LLMSettings(model=CHAT)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        store_url = build(work)
        uow = UnitOfWork(open_store(store_url, read_only=True))
        handlers = [t.value for t in MemoryType]
        texts = [
            text or ""
            for c in COLLECTIONS
            for _, text in uow.vectors.records_missing_vectors(c, EMBEDDING, 0, 10**9)
        ]
        cl100k, o200k = (
            bpe_openai.get_encoding("cl100k_base"),
            bpe_openai.get_encoding("o200k_base"),
        )
        embed_plan = timed(
            "reembed --plan",
            lambda: reembed_plan(
                uow,
                list(COLLECTIONS),
                EMBEDDING,
                incremental=False,
                batch_size=256,
                via="batch",
                costs=costs,
                llm=llm,
                limits=limits,
            ),
            lambda: sum(len(t) for t in cl100k.encode_ordinary_batch(texts)),
        )
        items = uow.work.extraction_work(WorkQuery(handlers=handlers, force=True))
        snapshot_ids = sorted({i.snapshot_id for i in items})
        contents = {s: uow.work.snapshot_content(s) for s in snapshot_ids}
        prompts = [
            m["content"]
            for i in items
            for m in extraction_messages(contents[i.snapshot_id], MemoryType(i.handler))
        ] + [m["content"] for s in snapshot_ids for m in summary_messages(contents[s])]
        replay = timed(
            "replay --plan",
            lambda: replay_plan(
                uow,
                SnapshotSelection(),
                handlers,
                force=True,
                extractor="openai",
                summaries=True,
                via="batch",
                costs=costs,
                llm=llm,
                limits=limits,
            ),
            lambda: sum(len(t) for t in o200k.encode_ordinary_batch(prompts)),
        )
        memories = sum(
            line.items
            for line in embed_plan.lines
            if line.purpose.startswith("embed ") and line.purpose != "embed stm"
        )
        memory_tokens = sum(
            line.input_tokens
            for line in embed_plan.lines
            if line.purpose.startswith("embed ") and line.purpose != "embed stm"
        )
        snapshots = len(snapshot_ids)
        print(
            f"corpus: {memories:,} memories ({memory_tokens / memories:.1f} tokens each), "
            f"{snapshots:,} snapshots ({replay.input_tokens / snapshots:,.0f} prompt tokens each, "
            f"four extractions and a summary)"
        )
        worked = {
            "re-embed 1,000,000 memories": [
                PlanLine(
                    purpose="embed",
                    model=EMBEDDING,
                    tokenizer="cl100k_base",
                    items=1_000_000,
                    requests=math.ceil(1_000_000 / 256),
                    input_tokens=round(memory_tokens / memories * 1_000_000),
                    provider=True,
                )
            ],
            "replay 100,000 snapshots": [
                line.model_copy(
                    update={
                        "items": round(line.items / snapshots * 100_000),
                        "requests": round(line.requests / snapshots * 100_000),
                        "input_tokens": round(line.input_tokens / snapshots * 100_000),
                        "output_tokens": round(line.output_tokens / snapshots * 100_000),
                    }
                )
                for line in replay.lines
            ],
        }
        print(
            "| job | requests | input tokens | output tokens (expected) | live | batch "
            "| live duration at the example budget |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
        for job, lines in worked.items():
            model = lines[0].model
            cost = plan_cost(lines, costs.prices)
            requests = sum(line.requests for line in lines)
            tokens_in = sum(line.input_tokens for line in lines)
            tokens_out = sum(line.output_tokens for line in lines)
            duration = plan_duration(requests, tokens_in + tokens_out, *BUDGETS[model])
            print(
                f"| {job} ({model}) | {requests:,} | {tokens_in:,} | {tokens_out:,} | "
                f"${cost.live_usd:,.2f} | ${cost.batch_usd:,.2f} | "
                f"{duration.live_seconds / 3600:.1f} h at {BUDGETS[model][0]:,} RPM / "
                f"{BUDGETS[model][1]:,} TPM |"
            )
        uow.close()


if __name__ == "__main__":
    main()
