"""``replay --preview`` (issue 42) on every backend with transactions: a prompt change to the
semantic handler, previewed against the memories the old prompt taught, through the real
``openai`` client against the fake endpoint, which answers by the prompt it is sent. The
preview leaves the store's records as they were; the replay that follows makes exactly the
changes it listed (same memories, versions and texts) and asks the provider nothing, answered
from what the preview kept; an erase of the user removes what was kept."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.llm.kept import KeptAnswers, forget_user
from mempipe.adapters.llm.offline import OfflineExtractor
from mempipe.adapters.llm.openai_compat import OpenAIExtractor
from mempipe.adapters.store import Store
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.audit import AuditSelection
from mempipe.schemas.bundle import BUNDLE_MODELS, BundleSelection
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.prompts import OfflineRule, Prompt
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.work import ExtractionVersion, WorkQuery
from mempipe.services.replay.extract import ReplayContext, current_extraction, replay_batch
from mempipe.services.replay.preview import _batches, rehearse
from tests.fakes.openai_server import Answer, fake_openai, memories
from tests.helpers import AIRPORT_SNAPSHOT
from tests.stores import atlas_strict_store, load, secantus_store, sqlite_store

OLD, NEW = "Facts, tersely.", "Facts, as sentences."
WORDS = re.compile(r"[A-Za-z]{4,}")


def by_prompt(body: dict[str, Any]) -> Answer:
    """Each snapshot's first long words as its topic: the old prompt states it tersely and adds
    a note of the snapshot; the new one states it as a sentence (an UPDATE of the topic), keeps
    a shared fact word for word, drops the note (no longer found) and adds a new fact."""
    words = WORDS.findall(body["messages"][-1]["content"])[:3]
    topic = " ".join(words).lower()
    if body["messages"][0]["content"] == OLD:
        return memories(
            {"text": f"topic {topic}", "label": "topic"},
            {"text": "The user travels for work.", "label": "travel"},
            {"text": f"note about {topic}", "label": f"note {topic}"},
        )
    return memories(
        {"text": f"The user talked about {topic}.", "label": "topic"},
        {"text": "The user travels for work.", "label": "travel"},
        {"text": f"The user mentioned {words[-1].lower()}.", "label": f"mention {topic}"},
    )


@pytest.fixture(params=["sqlite", "atlas-strict", "secantus"])
def backend(request, tmp_path) -> Iterator[Store]:
    if request.param == "secantus":
        opened = secantus_store(request.getfixturevalue("secantus_uri"))
    else:
        opened = {"sqlite": sqlite_store, "atlas-strict": atlas_strict_store}[request.param](
            tmp_path
        )
    yield opened
    opened.close()


def everything(store: Store) -> dict[str, list[dict[str, Any]]]:
    """Every record the store holds, as export reads it."""
    held: dict[str, list[dict[str, Any]]] = {}
    for collection in BUNDLE_MODELS:
        after, rows = None, []
        while True:
            page, after = store.export_page(collection, BundleSelection(), after, 500)
            rows += [r.model_dump(mode="json") for r in page]
            if len(page) < 500:
                break
        held[collection] = rows
    return held


def context(url: str, prompt: str, run_id: str, kept: Path, *, keep: bool) -> ReplayContext:
    llm = LLMSettings(
        base_url=url, api_key="k", model="m", prompts={"semantic": Prompt(text=prompt)}
    )
    extractor = KeptAnswers(OpenAIExtractor(llm), llm, kept, keep=keep)
    return ReplayContext(run_id=run_id, extractor=extractor, embedder=HashingEmbedder(64), llm=llm)


def test_the_preview_is_exact_and_writes_nothing(backend, tmp_path) -> None:
    load(backend, tmp_path)
    uow, kept = UnitOfWork(backend), tmp_path / "kept"
    work = backend.extraction_work(WorkQuery(handlers=["semantic"]))
    with fake_openai() as (fake, url):
        fake.responder = by_prompt
        for batch in _batches(work):
            replay_batch(uow, batch, context(url, OLD, "old", kept, keep=False))
        stale = {
            "semantic": ExtractionVersion(
                extractor="openai:m", prompt_version=Prompt(text=NEW).version
            )
        }
        again = backend.extraction_work(WorkQuery(handlers=["semantic"], stale=stale))
        assert again, "every extraction ran with the old prompt: all stale"

        before = everything(backend)
        asked = len(fake.requests)
        previewed = rehearse(uow, again, context(url, NEW, "preview", kept, keep=True))
        assert len(fake.requests) - asked == len(again), "one question per extraction"
        assert everything(backend) == before, "the preview wrote nothing"

        asked = len(fake.requests)
        for batch in _batches(again):
            replay_batch(uow, batch, context(url, NEW, "new", kept, keep=False))
        assert len(fake.requests) == asked, "the replay was answered from the kept answers"

    def outcome(c: Any) -> tuple:
        return (c.memory_type, c.action, c.memory_id, c.version, c.superseded_id, c.snapshot_id)

    replayed = list(backend.audit_rows(AuditSelection(run_id="new")))
    assert [(*outcome(c), c.after) for c in previewed.changes] == [
        (*outcome(r), r.text) for r in replayed
    ]
    actions = {c.action.value for c in previewed.changes}
    assert {"ADD", "UPDATE"} <= actions, actions
    updated = [c for c in previewed.changes if c.action.value == "UPDATE"]
    assert all(c.before and c.before.startswith("topic ") for c in updated), "the text before"
    assert all(c.after.startswith("The user talked about ") for c in updated)
    assert previewed.lost, "the old prompt's notes are no longer found"
    assert {m.text.split()[0] for m in previewed.lost} == {"note"}
    assert all(
        backend.get_memory("semantic", m.memory_id)["status"] == "active" for m in previewed.lost
    ), "a replay leaves what it no longer finds as it is"
    assert not list(kept.rglob("*.json")), "a kept answer is used once"


def test_an_erase_removes_the_users_kept_answers(tmp_path) -> None:
    kept = tmp_path / "kept"
    with fake_openai() as (fake, url):
        fake.responder = by_prompt
        extractor = context(url, NEW, "preview", kept, keep=True).extractor
        extractor.extract(AIRPORT_SNAPSHOT, MemoryType.SEMANTIC)
    assert len(list(kept.rglob("*.json"))) == 1
    assert forget_user(kept, "someone-else") == 0
    assert forget_user(kept, AIRPORT_SNAPSHOT.user_id) == 1
    assert not list(kept.rglob("*.json"))


RULE_A = OfflineRule(
    pattern=r"\bmy home airport is (?:now )?(?P<code>[a-z]{3})\b",
    label="home_airport",
    text="Home airport: {code}.",
)
RULE_B = RULE_A.model_copy(update={"text": "The user flies from {code}."})


def test_an_offline_rule_change_is_previewed_and_replayed_exactly(backend, tmp_path) -> None:
    """Two configurations of the offline extractor's rules: the second is another extractor
    version, so its extractions are stale, and its preview lists what its replay then does."""
    load(backend, tmp_path)
    uow = UnitOfWork(backend)

    def ctx(rule: OfflineRule, run_id: str) -> ReplayContext:
        return ReplayContext(
            run_id=run_id, extractor=OfflineExtractor([rule]), embedder=HashingEmbedder(64)
        )

    work = backend.extraction_work(WorkQuery(handlers=["semantic"]))
    for batch in _batches(work):
        replay_batch(uow, batch, ctx(RULE_A, "a"))
    second = ctx(RULE_B, "preview")
    assert second.extractor.name != ctx(RULE_A, "a").extractor.name, "a new rules version"
    stale = current_extraction(second.extractor, second.llm, ["semantic"])
    again = backend.extraction_work(WorkQuery(handlers=["semantic"], stale=stale))
    assert len(again) == len(work)

    before = everything(backend)
    previewed = rehearse(uow, again, second)
    assert everything(backend) == before
    for batch in _batches(again):
        replay_batch(uow, batch, ctx(RULE_B, "b"))
    replayed = [
        (r.action, r.memory_id, r.version, r.text)
        for r in backend.audit_rows(AuditSelection(run_id="b"))
    ]
    assert replayed == [(c.action, c.memory_id, c.version, c.after) for c in previewed.changes]
    reworded = [c for c in previewed.changes if c.after.startswith("The user flies from ")]
    assert reworded, "the rule's new wording reaches the airport facts"
    assert all(c.before is None or c.before.startswith("Home airport: ") for c in reworded)


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"pattern": "(", "label": "x", "text": "y"}, "the offline rule pattern"),
        ({"pattern": "(?P<a>x)", "label": "{b}", "text": "y"}, "names b, which its pattern"),
    ],
)
def test_an_offline_rule_that_cannot_work_is_refused(rule, message) -> None:
    with pytest.raises(ValueError, match=message):
        OfflineRule.model_validate(rule)


def test_a_preview_whose_questions_failed_exits_as_a_replay_with_them_would(
    prefect_server, tmp_path, monkeypatch
) -> None:
    """Issue 54: every question refused, the preview prints what it found and fails (exit 1,
    one error line naming how many failed and why), its JSON document beside it."""
    import json

    from click.testing import CliRunner

    from mempipe.cli import cli
    from tests.fakes.openai_server import error

    monkeypatch.chdir(tmp_path)
    sample = Path(__file__).parents[2] / "examples" / "sample-archive"
    assert CliRunner().invoke(cli, ["backfill", str(sample), "--user-id", "maya"]).exit_code == 0
    with fake_openai() as (fake, url):
        fake.responder = lambda body: error(400, "this request is not acceptable")
        monkeypatch.setenv("MEMPIPE_LLM_BASE_URL", url)
        monkeypatch.setenv("MEMPIPE_LLM_API_KEY", "sk-preview")
        args = ["replay", "--extractor", "openai", "--handlers", "semantic", "--preview"]
        failed = CliRunner().invoke(cli, [*args, "--json"])
    assert failed.exit_code == 1, failed.output
    document = json.loads(failed.stdout)
    assert document["failed"] == document["extractions"] > 0
    assert document["kind"] == "incomplete"
    (line,) = failed.stderr.splitlines()
    assert line.startswith(f"error: {document['failed']} of {document['extractions']} extraction")
    assert "not acceptable" in line
