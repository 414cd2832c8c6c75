"""The offline rule-based extractor: deterministic, no network, the embedded default.

What it finds, in plainly worded conversation:

* semantic: the user's facts and preferences ("my home airport is LIS", "my home airport is now
  LIS", "I live in / moved to Lisbon", "my name is", "I'm Maya", "I work at", "I prefer / I like
  / my favourite X is"), labelled so that a change ("... is now ...") updates the old fact;
* episodic: what the user says happened ("I met Priya from logistics at the Lisbon office
  yesterday"), with capitalised names as participants and the time from the turn (yesterday and
  last week counted back from it);
* procedural: steps given as "To X: first A, then B, then C" or "Step 1: ... Step 2: ...", named
  by the "To X" or by the question they answer ("How do we X?");
* taxonomic: definitions ("A canary is ...", "X means ...", "X stands for ...") and one-line
  answers to "What is X?" / "What does X mean / stand for?".

What it cannot: anything implied rather than said, facts about other people than the user,
negations and corrections worded any other way, pronouns that need the context to resolve,
non-English text. Use the LLM extractor for those.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta

from mempipe.adapters.llm.base import ExtractorCapabilities
from mempipe.domain.reconcile import Candidate, Verdict
from mempipe.schemas.extraction import (
    Extracted,
    ExtractedEpisode,
    ExtractedProcedure,
    ExtractedSemantic,
    ExtractedTerm,
)
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.transcript import SnapshotContent, TurnLine

NAME = "offline-rules-v1"

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_MY_X_IS = re.compile(
    r"\bmy (?P<what>[a-z][a-z ]{1,40}?) (?:is|are)(?P<now> now)? (?P<value>[^,.;!?]+)", re.I
)
_LIVE = re.compile(
    r"\bI (?:(?:just |recently )?moved to|live in|am based in) "
    r"(?P<place>[A-Z]\w*(?: [A-Z]\w*)*)"
)
_NAME = re.compile(r"\b(?:my name is|I'm|I am) (?P<name>[A-Z][a-z]+)\b")
_WORK = re.compile(r"\bI work (?:at|for) (?P<employer>[A-Z][\w&. ]+?)(?=[,.;!?]|$)")
_PREFER = re.compile(
    r"\bI (?:still |always |really )*(?:prefer|like|love|hate|avoid) (?P<what>[^,.;!?]+)", re.I
)
_EVENT = re.compile(
    r"\bI (?:met|visited|called|talked to|spoke with|flew to|attended|had (?:a|an) \w+ with)\b",
    re.I,
)
_WHEN = {"yesterday": timedelta(days=1), "last week": timedelta(days=7), "today": timedelta(0)}
_STEPS_TO = re.compile(r"\bTo (?P<name>[^:]{3,80}):\s*(?P<body>.+)", re.I | re.S)
_STEP_SPLIT = re.compile(r"(?:,\s*)?\b(?:first|then|next|finally|and then)\b\s*|Step \d+:\s*", re.I)
_HOW = re.compile(r"\bhow (?:do|can|should) (?:we|i|you) (?P<name>[^?]{3,80})\?", re.I)
_DEFINES = re.compile(
    r"^(?:an? |the )?(?P<term>[A-Za-z][\w-]*(?: [\w-]+){0,2}) "
    r"(?:is (?=an? |the )|means |stands for )(?P<definition>.+)$",
    re.I,
)
_ASKS = re.compile(
    r"\bwhat (?:is|are) (?:an? |the )?(?P<t1>[\w' -]{2,40})\?"
    r"|\bwhat does '?(?P<t2>[\w -]{2,40})'? (?:mean|stand for)(?: exactly)?\?",
    re.I,
)
_CAPITALISED = re.compile(r"(?<!the )(?<!at )(?<!in )(?<!to )(?<!from )\b[A-Z][a-z]+\b")
_NOT_NAMES = {
    "I",
    "The",
    "A",
    "An",
    "We",
    "My",
    "It",
    "Yesterday",
    "Today",
    "Also",
    "Thanks",
    "Great",
}


class OfflineExtractor:
    name = NAME
    capabilities = ExtractorCapabilities()

    def summarize(self, snapshot: SnapshotContent) -> str:
        raise NotImplementedError("the offline extractor keeps the deterministic summary")

    def judge(self, text: str, existing: Candidate) -> Verdict:
        raise NotImplementedError("the offline extractor has no judge")

    def extract(self, snapshot: SnapshotContent, memory_type: MemoryType) -> list[Extracted]:
        found: list[Extracted] = list(_HANDLERS[memory_type](snapshot))
        unique: dict[str, Extracted] = {}
        for memory in found:
            unique.setdefault(memory.model_dump_json(), memory)
        return list(unique.values())


def _user_sentences(snapshot: SnapshotContent) -> Iterator[tuple[TurnLine, str]]:
    for turn in snapshot.turns:
        if turn.role == "user":
            for sentence in _SENTENCE.findall(turn.content):
                if sentence.strip():
                    yield turn, sentence.strip()


def _label(words: str) -> str:
    return "_".join(re.findall(r"[a-z0-9]+", words.lower()))


def semantic(snapshot: SnapshotContent) -> Iterator[ExtractedSemantic]:
    for _, sentence in _user_sentences(snapshot):
        if match := _MY_X_IS.search(sentence):
            what, value = match["what"].strip(), match["value"].strip()
            if not what.startswith(("favourite", "favorite")) or value:
                yield ExtractedSemantic(text=f"User's {what} is {value}.", label=_label(what))
        if match := _LIVE.search(sentence):
            yield ExtractedSemantic(
                text=f"User lives in {match['place'].strip()}.", label="home_city"
            )
        if match := _NAME.search(sentence):
            yield ExtractedSemantic(text=f"User's name is {match['name']}.", label="name")
        if match := _WORK.search(sentence):
            yield ExtractedSemantic(
                text=f"User works at {match['employer'].strip()}.", label="employer"
            )
        if match := _PREFER.search(sentence):
            what = match["what"].strip()
            verb = re.search(r"prefer|like|love|hate|avoid", match[0], re.I)[0].lower()  # type: ignore[index]
            yield ExtractedSemantic(text=f"User {verb}s {what}.", label=f"{verb}s_{_label(what)}")


def episodic(snapshot: SnapshotContent) -> Iterator[ExtractedEpisode]:
    for turn, sentence in _user_sentences(snapshot):
        if not _EVENT.search(sentence):
            continue
        names = [w for w in _CAPITALISED.findall(sentence) if w not in _NOT_NAMES]
        yield ExtractedEpisode(
            summary=_third_person(sentence),
            participants=["user", *dict.fromkeys(names)],
            occurred_at=_when(sentence, turn.created_at),
        )


def _when(sentence: str, said_at: datetime | None) -> datetime | None:
    if said_at is None:
        return None
    for phrase, back in _WHEN.items():
        if phrase in sentence.lower():
            return said_at - back
    return said_at


def _third_person(sentence: str) -> str:
    text = re.sub(r"\bI\b", "User", sentence)
    text = re.sub(r"\bmy\b", "their", text, flags=re.I)
    text = re.sub(r"\bme\b", "them", text)
    text = re.sub(r"^(Thanks|Also|So|Oh)[,.]?\s+", "", text)
    return text[0].upper() + text[1:] if text else text


def procedural(snapshot: SnapshotContent) -> Iterator[ExtractedProcedure]:
    asked: str | None = None
    for turn in snapshot.turns:
        if turn.role == "user" and (match := _HOW.search(turn.content)):
            asked = match["name"].strip()
            continue
        match = _STEPS_TO.search(turn.content)
        name = match["name"].strip() if match else asked
        body = match["body"] if match else turn.content
        steps = [s.strip(" .,;") for s in _STEP_SPLIT.split(body) if s.strip(" .,;")]
        if name and len(steps) >= 2 and (match or re.search(r"\bthen\b|Step \d", body, re.I)):
            yield ExtractedProcedure(
                name=name, steps=steps, when_to_use=f"When you need to {name}."
            )
            asked = None


def taxonomic(snapshot: SnapshotContent) -> Iterator[ExtractedTerm]:
    asked: str | None = None
    for turn in snapshot.turns:
        if turn.role == "user":
            match = _ASKS.search(turn.content)
            asked = (match["t1"] or match["t2"]).strip(" '") if match else None
            continue
        for sentence in _SENTENCE.findall(turn.content):
            sentence = sentence.strip()
            if match := _DEFINES.match(sentence):
                yield ExtractedTerm(term=match["term"], definition=match["definition"].strip())
            elif asked and sentence:
                yield ExtractedTerm(term=asked, definition=sentence)
            asked = None


_HANDLERS = {
    MemoryType.SEMANTIC: semantic,
    MemoryType.EPISODIC: episodic,
    MemoryType.PROCEDURAL: procedural,
    MemoryType.TAXONOMIC: taxonomic,
}
