"""What the offline extractor finds in plainly worded conversation (see its docstring)."""

from __future__ import annotations

from datetime import UTC, datetime

from mempipe.adapters.llm.offline import OfflineExtractor
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.transcript import SnapshotContent, TurnLine

AT = datetime(2024, 6, 2, 14, 0, tzinfo=UTC)


def snapshot(*turns: tuple[str, str]) -> SnapshotContent:
    return SnapshotContent(
        snapshot_id="s",
        org_id="o",
        project_id="p",
        session_id="x",
        turns=[TurnLine(role=r, content=c, created_at=AT) for r, c in turns],
    )


def extract(memory_type: MemoryType, *turns: tuple[str, str]):
    return OfflineExtractor().extract(snapshot(*turns), memory_type)


def test_facts_and_their_changes_share_a_label() -> None:
    before = extract(MemoryType.SEMANTIC, ("user", "My home airport is JFK."))
    after = extract(MemoryType.SEMANTIC, ("user", "My home airport is now LIS."))
    assert [(m.label, m.text) for m in before] == [("home_airport", "User's home airport is JFK.")]
    assert [(m.label, m.text) for m in after] == [("home_airport", "User's home airport is LIS.")]


def test_where_the_user_lives_name_and_preferences() -> None:
    found = extract(
        MemoryType.SEMANTIC,
        ("user", "Hi! I'm Maya. I live in New York and I always prefer a window seat."),
    )
    assert {m.label: m.text for m in found} == {
        "name": "User's name is Maya.",
        "home_city": "User lives in New York.",
        "prefers_a_window_seat": "User prefers a window seat.",
    }


def test_assistant_turns_are_not_facts_about_the_user() -> None:
    assert extract(MemoryType.SEMANTIC, ("assistant", "My name is Assistant.")) == []


def test_events_have_participants_and_a_time_counted_back_from_the_turn() -> None:
    (event,) = extract(MemoryType.EPISODIC, ("user", "I met Priya from logistics yesterday."))
    assert event.summary == "User met Priya from logistics yesterday."
    assert event.participants == ["user", "Priya"]
    assert event.occurred_at == datetime(2024, 6, 1, 14, 0, tzinfo=UTC)


def test_procedures_are_named_by_the_question_they_answer() -> None:
    (procedure,) = extract(
        MemoryType.PROCEDURAL,
        ("user", "How do we rotate the API key?"),
        ("assistant", "First revoke the old key, then create a new one, then update the vault."),
    )
    assert procedure.name == "rotate the api key"
    assert procedure.steps == ["revoke the old key", "create a new one", "update the vault"]


def test_answers_to_what_is_questions_and_the_user_s_own_definitions_are_terms() -> None:
    found = extract(
        MemoryType.TAXONOMIC,
        ("user", "What does SLO stand for?"),
        ("assistant", "Service level objective."),
        ("user", "What is a canary?"),
        ("assistant", "A canary is a small release watched before the full rollout."),
        ("user", "At work, 'red-eye' means a deploy that fails overnight."),
        ("user", "We call the Friday freeze the quiet window."),
    )
    assert {(m.term, m.definition) for m in found} == {
        ("slo", "Service level objective."),
        ("canary", "a small release watched before the full rollout."),
        ("red-eye", "a deploy that fails overnight."),
        ("quiet window", "the Friday freeze"),
    }


def test_praise_and_unasked_assistant_sentences_are_not_terms() -> None:
    assert (
        extract(
            MemoryType.TAXONOMIC,
            ("assistant", "Tokyo is a fantastic city for foodies!"),
            ("assistant", "A potluck is a great way to bring everyone together."),
            ("user", "What is the best pan?"),
            ("assistant", "This is a great question!"),
        )
        == []
    )


def test_a_clause_that_happens_to_say_means_is_not_a_term() -> None:
    found = extract(
        MemoryType.TAXONOMIC,
        ("user", "But if it means carrying more weight, I'd rather not."),
        ("user", "P0 means drop everything and fix it now."),
        ("user", "What is 2 plus 7?"),
        ("assistant", "2 plus 7 is 9."),
    )
    assert [(m.term, m.definition) for m in found] == [("p0", "drop everything and fix it now.")]


def test_questions_and_reactions_to_suggestions_are_not_facts() -> None:
    assert (
        extract(
            MemoryType.SEMANTIC,
            ("user", "Are my survey questions unbiased?"),
            ("user", "I like the idea of a potluck. I love those ideas."),
            ("user", "If my budget is tight, what should I do."),
        )
        == []
    )


def test_plans_are_facts_about_the_user() -> None:
    found = extract(MemoryType.SEMANTIC, ("user", "I'm planning to visit Kyoto in April."))
    assert [(m.label, m.text) for m in found] == [
        ("plans_visit_kyoto_in_april", "User plans to visit Kyoto in April.")
    ]


def test_a_long_markdown_guide_is_not_a_procedure() -> None:
    guide = "To clean a camera:\n\n1. **Dust**: first brush it, then wipe it.\n2. **Lens**: ..."
    assert extract(MemoryType.PROCEDURAL, ("assistant", guide)) == []


def test_nothing_of_a_kind_is_an_empty_list() -> None:
    assert extract(MemoryType.PROCEDURAL, ("user", "Thanks, bye!")) == []
