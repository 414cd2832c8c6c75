"""``mempipe replay --preview`` (issue 42) as ops run it: ``mempipe`` commands, the real
``openai`` client against the fake endpoint answering by the prompt it is sent. A prompt change
to the semantic handler is previewed on a drawn sample (``--sample --seed``): the store file's
bytes are the same before and after; ``--json`` is one document; the page (``--html``) opens in
a real browser with every change on it; the replay of the same draw right after makes exactly
the changes the preview listed, without asking the provider again; an erase of a previewed user
removes the kept answers and the page."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from mempipe.adapters.llm.kept import shown_users
from mempipe.schemas.prompts import Prompt
from tests.fakes.openai_server import Answer, completion, fake_openai, memories
from tests.helpers import invoke, prompted, read
from tests.processes import opened

pytestmark = pytest.mark.prefect
USERS = 4
AIRPORT = re.compile(r"My home airport is (\w+)")
OLD = "Extract the user's home airport as a fact: short text. JSON only."
NEW = "Extract the user's home airport as one sentence in the third person. JSON only."


def by_prompt(body: dict[str, Any]) -> Answer:
    """The same attribute (label ``home_airport``) in other words under the new prompt."""
    if "response_format" not in body:
        return completion("The user updated their travel profile.")
    found = AIRPORT.search(body["messages"][-1]["content"])
    if found is None:
        return memories()
    if body["messages"][0]["content"] == OLD:
        return memories({"text": f"home airport {found[1]}", "label": "home_airport"})
    return memories({"text": f"User's home airport is {found[1]}.", "label": "home_airport"})


def test_a_prompt_change_previewed_then_replayed(prefect_server, tmp_path) -> None:
    config, prompt = prompted(tmp_path, USERS, OLD)  # each user's airport, month by month
    db = tmp_path / "memory.db"
    common = ["--store", f"sqlite:///{db}", "--config", str(config)]
    replay = ["replay", "--extractor", "openai", "--handlers", "semantic", *common]
    draw = ["--stale", "--sample", "5", "--seed", "7"]
    with fake_openai() as (fake, url):
        fake.responder = by_prompt
        env = dict(MEMPIPE_LLM_BASE_URL=url, OPENAI_API_KEY="k")

        def mempipe(*args: str) -> dict[str, Any]:
            done = invoke(*args, "--json", cwd=tmp_path, env=env)
            assert done.exit_code == 0, done.stderr
            return json.loads(done.stdout)

        mempipe("backfill", "archive.jsonl", *common)
        mempipe(*replay)
        first = [body for body in fake.requests if "response_format" in body]
        prompt.write_text(NEW)

        before = hashlib.sha256(db.read_bytes()).hexdigest()
        asked = len(fake.requests)
        preview = mempipe(*replay, *draw, "--preview", "--html")
        assert hashlib.sha256(db.read_bytes()).hexdigest() == before, "not a byte written"
        assert len(fake.requests) - asked == preview["extractions"] == 5
        assert preview["requests"] == preview["kept"] == 5
        assert preview["extraction"]["semantic"]["prompt_version"] == Prompt(text=NEW).version
        assert preview["plan"]["lines"][0]["items"] > preview["sample_plan"]["lines"][0]["items"]
        [spent] = [s for s in preview["spent"] if s["kind"] == "extraction"]
        assert spent["requests"] == 5, "what the preview spent"
        assert spent["input_tokens"] > 0

        asked = len(fake.requests)
        replayed = mempipe(*replay, *draw)
        assert len(fake.requests) == asked, "answered from what the preview kept"
        assert replayed["extractions"] == 5

    rows = read(
        db,
        "SELECT memory_type, action, memory_id, version, superseded_id, snapshot_id, text "
        f"FROM audit WHERE run_id = '{replayed['run_id']}' ORDER BY id",
    )
    fields = ("memory_type", "action", "memory_id", "version", "superseded_id", "snapshot_id")
    listed = [(*(c[f] for f in fields), c["after"]) for c in preview["changes"]]
    assert sorted(rows) == sorted(listed), "the replay made exactly the changes listed"
    assert len(listed) == preview["total"]["added"] + preview["total"]["updated"] == 5
    assert all(c["after"].startswith("User's home airport is ") for c in preview["changes"])
    for change in preview["changes"]:  # an older snapshot's new words are history
        assert change["action"] == ("ADD" if change["as_history"] else "UPDATE")
        assert (change["before"] or "home airport ").startswith("home airport ")

    dom, console = opened(Path(preview["html"]), tmp_path / "preview.png")
    assert re.search(r"<h1>Replay preview: 5 snapshot\(s\) of sqlite:", dom)
    for change in preview["changes"]:
        assert f"<td>{change['after']}</td>" in dom.replace("&#x27;", "'")
    assert not [line for line in console if "Uncaught" in line]

    report = mempipe("report", *common, "--html", str(tmp_path / "report.html"))
    drawn = (tmp_path / "report.html").read_text()
    assert "<h2>Spend by day and memory type</h2>" in drawn
    assert "<td>extraction</td><td>semantic</td><td>gpt-4o-mini</td><td>live</td>" in drawn
    extracted = [s for s in report["spend"] if s["kind"] == "extraction"]
    assert [(s["memory_type"], s["model"]) for s in extracted] == [("semantic", "gpt-4o-mini")]
    assert extracted[0]["requests"] == len(first), "the runs' spend (the preview's is no run's)"
    assert extracted[0]["usd"] > 0, "priced from the price table"

    page = Path(preview["html"])
    shown = shown_users(page)
    assert shown
    erased = mempipe("erase", "--user-id", shown[0], "--yes", *common)
    assert erased["counts"]["kept_answers"] == 1, "the page (the replay used the answers)"
    assert not page.exists(), "an erase of a user the page shows removes the page"
