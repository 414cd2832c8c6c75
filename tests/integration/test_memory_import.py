"""Memories of other systems (mem0, LangGraph / LangMem, mempipe's memory JSONL), written here
from their documented shapes, imported with the identity mapping the README shows: repeats and
case or punctuation variants REINFORCE, a changed value UPDATE where the judge can tell and
ADD otherwise, bad records rejected with their location, and a second import changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from mempipe.adapters.llm.openai_compat import OpenAIExtractor
from mempipe.schemas.bundle import BundleSelection
from mempipe.schemas.config import ReconcileThresholds
from mempipe.schemas.memory_import import MemoryFormat
from mempipe.schemas.replay import LLMSettings
from tests.fakes.openai_server import completion, fake_openai
from tests.stores import import_context, imported

FIXTURES = Path(__file__).parents[1] / "memory_fixtures"
MEM0 = Path(__file__).parents[2] / "examples" / "mem0-get-all.json"  # the sample the docs import
"""Kept apart from tests/fixtures, which holds conversation archives only."""


def held(store) -> list:
    return store.export_page("semantic", BundleSelection(), None, 1000)[0]


def test_mem0_imports_with_its_identity_mapping_and_repeats_reinforce(store, tmp_path) -> None:
    rejects = tmp_path / "rejects.jsonl"
    summary = imported(store, MEM0, MemoryFormat.MEM0, rejects)

    assert (summary.records_read, summary.added, summary.reinforced, summary.rejected) == (
        5,
        3,
        1,
        1,
    )
    (bad,) = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert (bad["message_index"], bad["path"]) == (3, str(MEM0))
    memories = {m.text: m for m in held(store)}
    airport = memories["User's home airport is LIS."]
    assert (airport.org_id, airport.user_id, airport.reinforcement_count) == ("acme", "alice", 1)
    assert airport.evidence == ["mem0:7f1c2a9e-0001", "mem0:7f1c2a9e-0002"]
    seat = memories["Prefers a window seat on long flights."]
    assert (seat.agent_id, seat.user_id) == ("travel-bot", "alice")
    assert memories["Likes hiking in the Alps."].user_id == "bob"
    audit = list(store.audit_rows())
    assert {(a.action.value, a.extractor) for a in audit} == {
        ("ADD", "import:mem0"),
        ("REINFORCE", "import:mem0"),
    }

    again = imported(
        store,
        MEM0,
        MemoryFormat.MEM0,
        tmp_path / "again.jsonl",
        ctx=import_context(run_id="imp2"),
    )
    assert (again.added, again.updated, again.reinforced) == (0, 0, 0)
    assert again.duplicates_skipped == 4
    assert len(list(store.audit_rows())) == len(audit), "nothing audited twice"


def test_langgraph_items_take_their_user_from_the_namespace(store, tmp_path) -> None:
    rejects = tmp_path / "rejects.jsonl"
    summary = imported(store, FIXTURES / "langgraph_store.jsonl", MemoryFormat.LANGGRAPH, rejects)
    assert (summary.added, summary.rejected) == (3, 2)
    assert [json.loads(line)["line"] for line in rejects.read_text().splitlines()] == [4, 5]
    assert {(m.user_id, m.text) for m in held(store)} == {
        ("alice", "User's home airport is LIS."),
        ("alice", "Allergic to peanuts."),
        ("carol", "Works night shifts at the hospital."),
    }
    assert {m.evidence[0] for m in held(store)} == {
        "langgraph:memories/alice/m-1",
        "langgraph:memories/alice/m-2",
        "langgraph:memories/carol/m-3",
    }


def changed(tmp_path: Path) -> Path:
    path = tmp_path / "changed.jsonl"
    lines = [
        {"id": "a", "memory": "User's home airport is LIS.", "user_id": "alice"},
        {"id": "b", "memory": "User's home airport is JFK.", "user_id": "alice"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


WIDE = ReconcileThresholds(ambiguous_from=0.1, reinforce_at=0.99)
"""So the two airports fall in the band the judge decides."""


def test_a_changed_value_updates_where_the_judge_can_tell_and_adds_otherwise(
    store, tmp_path
) -> None:
    from mempipe.adapters.store import open_store
    from mempipe.bootstrap import prepare_store

    path = changed(tmp_path)
    alone = imported(
        store, path, MemoryFormat.MEM0, tmp_path / "r1", ctx=import_context(thresholds=WIDE)
    )
    assert (alone.added, alone.updated) == (2, 0), "no judge: nothing is overwritten on a guess"

    url = f"sqlite:///{tmp_path / 'judged.db'}"
    prepare_store(url, None, create=True)
    store = open_store(url, migrate=True)
    with fake_openai() as (fake, endpoint):
        fake.responder = lambda body: completion("UPDATE")
        judged = OpenAIExtractor(LLMSettings(base_url=endpoint, model="m", api_key="k"))
        summary = imported(
            store,
            path,
            MemoryFormat.MEM0,
            tmp_path / "r2",
            ctx=import_context(run_id="imp2", extractor=judged, thresholds=WIDE),
        )
    assert (summary.added, summary.updated) == (1, 1)
    current = [m for m in held(store) if m.status.value == "active"]
    assert [m.text for m in current] == ["User's home airport is JFK."]
    (old,) = [m for m in held(store) if m.status.value == "superseded"]
    assert current[0].supersedes_id == old.id
    assert len(fake.requests) == 1, "the judge was asked about the pair once"
    store.close()


def test_mempipe_memory_jsonl_imports_every_type_and_verbatim_keeps_ids(store, tmp_path) -> None:
    path = tmp_path / "memories.jsonl"
    lines = [
        {
            "id": "s1",
            "memory_type": "semantic",
            "text": "Prefers aisle seats.",
            "label": "seat",
            "user_id": "dan",
            "created_at": "2024-01-02T03:04:05Z",
            "metadata": {"from": "crm"},
        },
        {
            "id": "p1",
            "memory_type": "procedural",
            "name": "rebook",
            "steps": ["find", "rebook"],
            "user_id": "dan",
        },
        {"id": "t1", "memory_type": "taxonomic", "term": "PNR", "definition": "booking record"},
        {
            "id": "e1",
            "memory_type": "episodic",
            "text": "Missed the 9:00 flight.",
            "user_id": "dan",
        },
        {"id": "x1", "memory_type": "semantic", "text": "odd", "colour": "blue"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rejects = tmp_path / "rejects.jsonl"
    summary = imported(store, path, MemoryFormat.MEMORIES, rejects, verbatim=True)
    assert (summary.added, summary.rejected) == (4, 1)
    assert "colour" in json.loads(rejects.read_text())["reason"]
    seat = store.get_memory("semantic", "s1")
    assert (seat["label"], seat["metadata"], seat["created_at"][:19]) == (
        "seat",
        {"from": "crm"},
        "2024-01-02T03:04:05",
    )
    assert store.get_memory("procedural", "p1")["steps"] == ["find", "rebook"]
    assert store.get_memory("taxonomic", "t1")["org_id"] == "acme"
    assert store.get_memory("episodic", "e1")["text"] == "Missed the 9:00 flight."
    again = imported(store, path, MemoryFormat.MEMORIES, tmp_path / "r2", verbatim=True)
    assert (again.added, again.duplicates_skipped) == (0, 4)


def test_an_import_counts_the_same_in_any_record_order(tmp_path) -> None:
    """A memory is reconciled in its own scope: one without an agent only among those without
    one, so an agent's restatement and a user-level one stay apart whichever comes first."""
    from mempipe.adapters.store import open_store

    records = [
        {"id": "a1", "memory": "Prefers a window seat.", "user_id": "alice", "agent_id": "bot"},
        {"id": "a2", "memory": "Prefers a window seat.", "user_id": "alice"},
        {"id": "a3", "memory": "Prefers a window seat.", "user_id": "alice", "agent_id": "bot"},
    ]
    outcomes = []
    for order, listed in (("forward", records), ("reversed", records[::-1])):
        path = tmp_path / f"{order}.json"
        path.write_text(json.dumps({"results": listed}))
        store = open_store(f"sqlite:///{tmp_path / order}.db", migrate=True)
        summary = imported(store, path, MemoryFormat.MEM0, tmp_path / f"{order}-rejects.jsonl")
        kept = sorted((m.agent_id or "", m.reinforcement_count) for m in held(store))
        store.close()
        outcomes.append((summary.added, summary.reinforced, kept))
    assert outcomes[0] == outcomes[1] == (2, 1, [("", 0), ("bot", 1)])


def test_letta_archival_passages_import_as_their_agents_facts(store, tmp_path) -> None:
    """Letta's archival memory, as its API lists an agent's passages: each a fact of that
    agent, its tags kept, Letta's own embedding left behind; a passage without text is a
    reject with its place, and the same fact again reinforces."""
    path = FIXTURES / "letta_passages.json"
    rejects = tmp_path / "rejects.jsonl"
    summary = imported(store, path, "letta", rejects)

    assert (summary.records_read, summary.added, summary.reinforced, summary.rejected) == (
        4,
        2,
        1,
        1,
    )
    (bad,) = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert bad["path"] == str(path)
    memories = {m.text: m for m in held(store)}
    airport = memories["The user's home airport is Lisbon (LIS)."]
    assert (airport.agent_id, airport.reinforcement_count) == ("agent-travel", 1)
    assert airport.evidence == ["letta:passage-0001", "letta:passage-0004"]


def test_letta_passages_kept_verbatim_keep_their_tags_and_times(store, tmp_path) -> None:
    path = FIXTURES / "letta_passages.json"
    summary = imported(store, path, "letta", tmp_path / "rejects.jsonl", verbatim=True)

    assert (summary.added, summary.rejected) == (3, 1)
    first = next(m for m in held(store) if m.created_at.isoformat().startswith("2025-03-01"))
    assert (first.agent_id, first.metadata) == (
        "agent-travel",
        {"source": "chat", "letta_tags": ["travel"]},
    )


def test_the_same_mem0_id_with_another_text_updates_its_memory_never_a_second(
    store, tmp_path
) -> None:
    """Issue 54: a memory edited in mem0 and exported again is the same memory: its new text
    supersedes the old version (kept), whatever their similarity; the same text again is a
    no-op."""
    rejects = tmp_path / "rejects.jsonl"
    first, edited = tmp_path / "first.json", tmp_path / "edited.json"
    first.write_text(
        json.dumps({"results": [{"id": "m-7", "memory": "Lives in Porto.", "user_id": "u"}]})
    )
    edited.write_text(
        json.dumps({"results": [{"id": "m-7", "memory": "Owns a red bicycle.", "user_id": "u"}]})
    )
    assert imported(store, first, MemoryFormat.MEM0, rejects).added == 1
    summary = imported(store, edited, MemoryFormat.MEM0, rejects)
    assert (summary.added, summary.updated) == (0, 1)
    versions = sorted(held(store), key=lambda m: m.version)
    assert [(m.text, m.status.value, m.version) for m in versions] == [
        ("Lives in Porto.", "superseded", 1),
        ("Owns a red bicycle.", "active", 2),
    ]
    again = imported(store, edited, MemoryFormat.MEM0, rejects)
    assert (again.added, again.updated, again.duplicates_skipped) == (0, 0, 1)


def test_the_good_records_of_a_mem0_document_are_kept_beside_one_past_a_limit(
    store, tmp_path, monkeypatch
) -> None:
    """Issue 54: the document's records are read one by one, so a record nested past the depth
    limit fails the file from itself on, and the records before it are imported."""
    from mempipe.archives import limits

    monkeypatch.setenv("MEMPIPE_ARCHIVE_MAX_DEPTH", "10")
    limits.archive_limits.cache_clear()
    deep: object = "too deep"
    for _ in range(20):
        deep = {"x": deep}
    good = [
        {"id": f"g{n}", "memory": f"Fact number {n} about trains.", "user_id": "u"}
        for n in range(3)
    ]
    for shape in ("pretty", "compact"):
        path = tmp_path / f"{shape}.json"
        document = {"results": [*good, {"id": "bad", "memory": "x", "metadata": deep}]}
        path.write_text(json.dumps(document, indent=2 if shape == "pretty" else None))
        summary = imported(store, path, MemoryFormat.MEM0, tmp_path / f"{shape}-rejects.jsonl")
        assert summary.records_read >= 3, shape
        assert summary.failed_files == [str(path)], shape
        assert "nested deeper than 10 levels" in summary.unread[str(path)], shape
    assert sorted(m.text for m in held(store)) == [g["memory"] for g in good]
    limits.archive_limits.cache_clear()
