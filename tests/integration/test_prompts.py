"""Prompts as configuration (issue 42): a handler's prompt given inline or in a file beside the
project configuration reaches the provider, through the real ``openai`` client against the fake
endpoint, in place of the built-in one; its version is its content's hash (with its name, when
it has one), so the same words are the same version under any name."""

from __future__ import annotations

import hashlib

import pytest

from mempipe.adapters.llm.openai_compat import OpenAIExtractor
from mempipe.adapters.llm.prompts import BUILT_IN, prompt_for
from mempipe.adapters.llm.registry import extractor_for
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.bootstrap import load_context
from mempipe.errors import ConfigError
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.prompts import Prompt
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.work import WorkQuery
from mempipe.services.replay.extract import replay_one
from tests.fakes.openai_server import Answer, fake_openai, memories
from tests.helpers import AIRPORT_SNAPSHOT

SNAPSHOT = AIRPORT_SNAPSHOT
LABELS = 'Extract the user\'s facts. Answer with JSON {"memories": [...]}, each a text and label.'


def configured(tmp_path, monkeypatch, url: str, prompts: str):
    (tmp_path / "project-config.yaml").write_text(
        f"memory:\n  extraction:\n    prompts:\n{prompts}"
    )
    monkeypatch.setenv("MEMPIPE_LLM_BASE_URL", url)
    monkeypatch.setenv("MEMPIPE_LLM_API_KEY", "k")
    context = load_context(
        store=f"sqlite:///{tmp_path / 'm.db'}", config=tmp_path / "project-config.yaml"
    )
    return context.replay_settings("openai")


def per_prompt(body: dict) -> Answer:
    """The fake answers by the system prompt it is sent: the configured one finds the fact."""
    system = body["messages"][0]["content"]
    if system == LABELS:
        return memories({"text": "User's home airport is LIS.", "label": "home_airport"})
    return memories()


def test_a_configured_prompt_is_what_the_provider_is_sent(tmp_path, monkeypatch) -> None:
    (tmp_path / "semantic.txt").write_text(LABELS)
    with fake_openai() as (fake, url):
        fake.responder = per_prompt
        settings = configured(
            tmp_path, monkeypatch, url, "      semantic: {file: semantic.txt, name: labels}\n"
        )
        extractor = extractor_for("openai", settings.llm)
        found = extractor.extract(SNAPSHOT, MemoryType.SEMANTIC)
        assert [m.label for m in found] == ["home_airport"]
        assert extractor.extract(SNAPSHOT, MemoryType.EPISODIC) == []
    semantic, episodic = (r["messages"][0]["content"] for r in fake.requests)
    assert semantic == LABELS
    assert episodic == prompt_for(LLMSettings(), MemoryType.EPISODIC).text, "built-in otherwise"
    digest = hashlib.sha256(LABELS.encode()).hexdigest()[:12]
    assert prompt_for(settings.llm, MemoryType.SEMANTIC).version == f"labels@{digest}"


def test_a_prompts_version_is_its_contents_hash() -> None:
    named, unnamed = Prompt(text=LABELS, name="labels"), Prompt(text=LABELS)
    assert named.digest == unnamed.digest
    assert unnamed.version == named.digest
    assert named.version == f"labels@{named.digest}"
    assert Prompt(text=LABELS + " ").digest != named.digest
    built_in = prompt_for(LLMSettings(), MemoryType.SEMANTIC)
    assert built_in.name == BUILT_IN
    assert built_in.version != prompt_for(LLMSettings(), MemoryType.EPISODIC).version


@pytest.mark.parametrize(
    ("prompts", "message"),
    [
        ("      semantic: {file: missing.txt}\n", "the semantic prompt file .*missing.txt"),
        ("      semantic: {file: empty.txt}\n", "the semantic prompt file .*empty.txt is empty"),
        ("      semantic: {name: nothing}\n", "a prompt needs its text or a file"),
        ("      semantic: {text: '  '}\n", "a prompt's text is empty"),
        ("      opinions: {text: x}\n", "opinions"),
    ],
)
def test_a_prompt_that_cannot_be_read_is_refused(tmp_path, monkeypatch, prompts, message) -> None:
    (tmp_path / "empty.txt").write_text("\n")
    with pytest.raises(ConfigError, match=message):
        configured(tmp_path, monkeypatch, "http://127.0.0.1:9", prompts)


def test_each_extraction_audit_row_and_memory_records_its_extractor_and_prompt(
    store, tmp_path
) -> None:
    from tests.stores import load, replay_all, replay_context

    load(store, tmp_path)
    prompt = Prompt(text=LABELS, name="labels")
    with fake_openai() as (fake, url):
        fake.responder = per_prompt
        llm = LLMSettings(
            base_url=url, api_key="k", model="fake", prompts={MemoryType.SEMANTIC: prompt}
        )
        results = replay_all(
            store, replay_context(extractor=OpenAIExtractor(llm), llm=llm), ["semantic"]
        )
    assert results
    assert {r.status for r in results} == {"done"}
    version = prompt.version
    states = store._rows(
        "SELECT DISTINCT extractor, prompt_version FROM snapshot_extractions "
        "WHERE handler = 'semantic'"
    )
    assert states == [("openai:fake", version)]
    rows = list(store.audit_rows())
    assert rows
    assert {(r.extractor, r.prompt_version) for r in rows} == {("openai:fake", version)}
    written = store._rows("SELECT DISTINCT extractor, prompt_version FROM memories_semantic")
    assert written == [("openai:fake", version)], "and so does every memory version"

    offline = replay_all(store, replay_context(), ["episodic"])
    assert {r.status for r in offline} == {"done"}
    assert store._rows(
        "SELECT DISTINCT extractor, prompt_version FROM snapshot_extractions "
        "WHERE handler = 'episodic'"
    ) == [("offline-rules-v2", None)], "an extractor without prompts records none"


def test_a_prompt_that_reads_another_value_for_a_key_updates_what_the_old_one_taught(
    store, tmp_path
) -> None:
    """The same snapshot re-extracted under a new prompt: a keyed fact read with another value
    supersedes the value the old prompt taught (a new version, its history kept); the same
    value read again is the same memory, so a second replay changes nothing."""
    from tests.stores import load, replay_context

    load(store, tmp_path)
    work = store.extraction_work(WorkQuery(handlers=["semantic"]))[:1]

    def airport(code: str):
        return lambda body: memories({"text": f"User's home airport is {code}.", "label": "home"})

    def replay(prompt: str, code: str) -> list:
        with fake_openai() as (fake, url):
            fake.responder = airport(code)
            llm = LLMSettings(
                base_url=url,
                api_key="k",
                model="f",
                prompts={MemoryType.SEMANTIC: Prompt(text=prompt)},
            )
            ctx = replay_context(extractor=OpenAIExtractor(llm), llm=llm)
            return [replay_one(UnitOfWork(store), item, ctx) for item in work]

    replay("first prompt", "LIS")
    [changed] = replay("second prompt", "OPO")
    assert (changed.added, changed.updated, changed.reinforced) == (0, 1, 0)
    versions = store._rows(
        "SELECT text, status, version FROM memories_semantic WHERE label = 'home' ORDER BY version"
    )
    assert versions == [
        ("User's home airport is LIS.", "superseded", 1),
        ("User's home airport is OPO.", "active", 2),
    ]
    [again] = replay("second prompt", "OPO")
    assert (again.added, again.updated, again.reinforced) == (0, 0, 0)
    assert len(store._rows("SELECT id FROM memories_semantic WHERE label = 'home'")) == 2
