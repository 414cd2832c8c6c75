"""``replay --stale`` after a prompt change (issue 42), by ``mempipe`` commands through
the real ``openai`` client against the fake endpoint, which answers by the prompt it is sent,
live and through the Batch API: the plan counts, and the run re-runs, exactly the done
extractions that ran with another prompt; every extraction, audit row and memory version names
the prompt version it ran with."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from mempipe.schemas.prompts import Prompt
from tests.fakes.openai_server import Answer, completion, fake_openai, memories
from tests.helpers import MONTHS, invoke, prompted, read

pytestmark = pytest.mark.prefect
USERS = 3
AIRPORT = re.compile(r"My home airport is (\w+)")
OLD = "Extract the user's home airport as a fact: short text, label home_airport. JSON only."
NEW = "Extract the user's home airport as one sentence in the third person. JSON only."


def by_prompt(body: dict[str, Any]) -> Answer:
    """The old prompt gets a terse fact, the new one a sentence about another attribute (a
    snapshot that taught an attribute once does not teach it again, whatever the words)."""
    if "response_format" not in body:
        return completion("The user updated their travel profile.")
    found = AIRPORT.search(body["messages"][-1]["content"])
    if found is None or body["messages"][0]["content"] not in (OLD, NEW):
        return memories()
    if body["messages"][0]["content"] == OLD:
        return memories({"text": f"home airport {found[1]}", "label": "airport"})
    return memories({"text": f"User's home airport is {found[1]}.", "label": "home_airport"})


@pytest.mark.parametrize("via", ["live", "batch"])
def test_stale_runs_exactly_what_another_prompt_extracted(prefect_server, tmp_path, via) -> None:
    config, prompt = prompted(tmp_path, USERS, OLD)  # each user's airport, month by month
    db = tmp_path / "memory.db"
    common = ["--store", f"sqlite:///{db}", "--config", str(config)]
    replay = ["replay", "--extractor", "openai", "--handlers", "semantic", *common]
    with fake_openai() as (fake, url):
        fake.responder = by_prompt
        env = dict(
            MEMPIPE_LLM_BASE_URL=url,
            OPENAI_API_KEY="k",
            MEMPIPE_LLM_MODEL="m",
            MEMPIPE_BATCH_POLL_FIRST_SECONDS="0.2",
            MEMPIPE_BATCH_POLL_MAX_SECONDS="0.5",
        )

        def mempipe(*args: str) -> dict[str, Any]:
            done = invoke(*args, "--json", cwd=tmp_path, env=env)
            assert done.exit_code == 0, done.stderr
            return json.loads(done.stdout)

        mempipe("backfill", "archive.jsonl", *common)
        assert mempipe(*replay)["extractions"] == USERS * MONTHS
        prompt.write_text(NEW)
        assert mempipe(*replay, "--user-id", "user000", "--force")["extractions"] == MONTHS

        stale = (USERS - 1) * MONTHS
        planned = mempipe(*replay, "--stale", "--via", via, "--plan")
        assert (
            next(line for line in planned["lines"] if line["purpose"] == "extract")["items"]
            == stale
        )
        sent = len(fake.requests) + len(fake.batches.lines)
        assert mempipe(*replay, "--stale", "--via", via)["extractions"] == stale
        asked = len(fake.requests) + len(fake.batches.lines) - sent
        assert asked == stale, "one request per stale extraction, live or in a batch line"
        assert mempipe(*replay, "--stale", "--via", via)["extractions"] == 0, "none left"

    new = Prompt(text=NEW).version
    assert read(
        db,
        "SELECT DISTINCT extractor, prompt_version FROM snapshot_extractions "
        "WHERE handler = 'semantic'",
    ) == [("openai:m", new)]
    old = Prompt(text=OLD).version
    audited = dict(read(db, "SELECT prompt_version, count(*) FROM audit GROUP BY 1"))
    assert audited == {old: USERS * MONTHS, new: USERS * MONTHS}, "one row per extraction"
    written = read(
        db, "SELECT text, prompt_version FROM memories_semantic WHERE label = 'home_airport'"
    )
    assert len(written) == USERS * MONTHS
    assert all(t.startswith("User's home airport is ") and v == new for t, v in written)
