"""The offline rule-based extractor: deterministic, no network, the embedded default.

What it finds, in plainly worded conversation:

* semantic: the user's facts, preferences and plans ("my home airport is LIS", "my home airport
  is now LIS", "I live in / moved to Lisbon", "my name is", "I'm Maya", "I work at", "I prefer /
  I like / my favourite X is", "I'm planning to / I plan to ..."), labelled so that a change
  ("... is now ...") updates the old fact;
* episodic: what the user says happened ("I met Priya from logistics at the Lisbon office
  yesterday"), with capitalised names as participants and the time from the turn (yesterday and
  last week counted back from it);
* procedural: short steps given as "To X: first A, then B, then C" or "Step 1: ... Step 2: ...",
  named by the "To X" or by the question they answer ("How do we X?");
* taxonomic: the terms the user or their team defines ("X means ...", "X stands for ...", "we
  call Y X"), and the one-sentence answer to the user's "What is X?" / "What does X mean?".

It keeps statements, not everything that looks like one: never a question, a praise ("X is a
great choice!"), a reaction to the assistant's suggestions ("I like that idea"), a pronoun for a
term, or a long guide in Markdown. Measured on real conversation (BENCHMARKS.md,
``bench/offline_extractor.py``): of what it keeps, 97% is a well-formed statement (97% on the
sessions no rule was tuned on; 23% before these rules), and it finds the plainly worded facts
planted into those conversations.

What it cannot: anything implied rather than said or worded otherwise, facts about other
people than the user, negations and corrections, pronouns that need the context to resolve,
non-English text. Use the LLM extractor for those.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
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
from mempipe.schemas.prompts import OfflineRule, rules_digest
from mempipe.schemas.transcript import SnapshotContent, TurnLine

NAME = "offline-rules-v2"
MAX_PROCEDURE_CHARS = 800

_SENTENCE = re.compile(r"(?:[^.!?\n]|(?<=\w)\.(?=\w))+[.!?]?")
_ABBREVIATION = re.compile(r"\b(?:St|Dr|Mr|Mrs|Ms|Mt|Jr|Sr|vs|etc|approx|e\.g|i\.e)\.", re.I)
_HELD_DOT = "\u2024"  # an abbreviation's dot, kept from ending the sentence
_WORDS = r"(?:[^,.;!?]|(?<=\d),(?=\d)|(?<=\w)\.(?=\w))"
"""Words up to the clause's end; "$1,500" and "linkedin.com" are one value."""
_MY_X_IS = re.compile(
    rf"\bmy (?P<what>[a-z]+(?: [a-z]+){{0,2}}) (?P<verb>is|are)(?P<now> now)? (?P<value>{_WORDS}+)",
    re.I,
)
_LIVE = re.compile(
    r"\bI (?:(?:just |recently )?moved to|live in|am based in) "
    r"(?P<place>[A-Z]\w*(?: [A-Z]\w*)*)"
)
_NAME = re.compile(r"\b(?:my name is|I'm|I am) (?P<name>[A-Z][a-z]+)\b")
_WORK = re.compile(r"\bI work (?:at|for) (?P<employer>[A-Z][\w&. ]+?)(?=[,.;!?]|$)")
_PREFER = re.compile(
    rf"\bI (?:still |always |really )*(?:prefer|like|love|hate|avoid) (?P<what>{_WORDS}+)", re.I
)
_NOT_PLANS = (
    r"(?:be|sound|feel|seem|need|have|say|tell|ask|try|guess|assume|look|give|share|go ahead|"
    r"continue|keep|stick|take a look|let)"
)
_PLAN = re.compile(
    rf"\bI(?:'m| am) (?:planning|going|hoping) to (?!{_NOT_PLANS}\b)(?P<what>{_WORDS}{{3,}})"
    rf"|\bI plan to (?!{_NOT_PLANS}\b)(?P<what2>{_WORDS}{{3,}})",
    re.I,
)
_NEXT_CLAUSE = re.compile(r"\s+(?:and|but|so|because|since|as|-)\s+(?:I|I'm|we|it|it's)\b.*$", re.I)
MAX_FACT_CHARS = 90
_REACTION = re.compile(
    r"^(?:[^\w\s]|the idea|the suggestion|those |these |that |this |it\b|them\b|some |all |"
    r"your |both |each |one |how |what |when |where |why |which |to (?:know|hear|see|get|try|"
    r"learn|have|make|start|explore|find|use|go|do|add|keep)\b)",
    re.I,
)
_UNSURE = re.compile(
    r"\b(?:if|whether|when|maybe|might|would|could|should|want|wants|need|needs|hope|wish|"
    r"ensure|sure|trying|wonder|wondering)\b",
    re.I,
)
_POINTS_AWAY = re.compile(
    r"\b(?:this|that|these|those)\b(?! (?:summer|winter|spring|fall|autumn|week|weekend|month|"
    r"year|morning|afternoon|evening)\b)|\bthe (?:city|area|place)\b|\bsomething\b|\banything\b|"
    r"\bsimilar$|\b(?:it|them|him|her|his|its|she|he|they|we|us|our)\b|\bone\b(?! of)|"
    r"\b(?:topic|conversation|chat|sounds|looks|seems|there|you|your)\b|^(?:number )?\d+$",
    re.I,
)
"""Words that need the conversation to mean something ("that success", "this trip", "a new
one"), or talk about the talk ("switch to a new topic")."""
_SECOND_SUBJECT = re.compile(r"\bI(?:'m|'ve|'d|'ll)?\b")
_UNFINISHED = {"a", "an", "the", "some", "more", "longer", "my", "their", "and", "or", "to"}
_NEXT_AFTER_COMMA = re.compile(
    r",\s*(?:and|but|so|which|because|as|since|though|although|while|when|where|especially|"
    r"like|including|too|I|it|we)\b",
    re.I,
)
_LEADS_IN = {
    "and",
    "but",
    "so",
    "also",
    "now",
    "then",
    "because",
    "since",
    "as",
    "well",
    "still",
    "just",
    "though",
    "although",
    "plus",
    "anyway",
    "yes",
    "oh",
    "ok",
    "okay",
    "think",
    "know",
    "guess",
    "mean",
    "said",
    "say",
    "too",
    "again",
    "lately",
    "recently",
    "currently",
    "actually",
}
_RELATIVE = re.compile(r"\b(?:where|what|how|why|which|that|who)\s*$", re.I)
_CHOSEN = re.compile(r"^the\b|\b(?:idea|ideas|option|options|suggestion|one)$", re.I)
"""A preference for "the honey", "the neutral chic idea": a pick among what the assistant
offered, not what the user is like."""
_NOT_FACTS = {  # ("my current one is ..." is left out by the ``ones?`` rule)
    "thing",
    "question",
    "questions",
    "command",
    "first command",
    "prompt",
    "request",
    "task",
    "next question",
    "part",
    "favorite part",
    "favourite part",
    "resume",
}
_EVENT = re.compile(
    r"\bI (?:met|visited|called|talked to|spoke with|flew to|attended|had (?:a|an) \w+ with)\b",
    re.I,
)
_NOT_AN_EVENT = re.compile(
    r",\s*I\b|^speaking of\b|\bI (?:think|wonder|was thinking)\b|'ll\b|\bwill\b|\byou\b|"
    r"\bone\b(?! of)",
    re.I,
)
_WHEN = {"yesterday": timedelta(days=1), "last week": timedelta(days=7), "today": timedelta(0)}
_STEPS_TO = re.compile(r"\bTo (?P<name>[^:,\n]{3,60}):\s*(?P<body>.+)", re.I | re.S)
_STEP_SPLIT = re.compile(r"(?:,\s*)?\b(?:first|then|next|finally|and then)\b\s*|Step \d+:\s*", re.I)
_HOW = re.compile(r"\bhow (?:do|can|should) (?:we|i|you) (?P<name>[^?]{3,80})\?", re.I)
_DEFINES = re.compile(
    r"^(?:an? |the )?(?P<term>[A-Za-z][\w-]*(?: [\w-]+){0,2}) "
    r"(?:is (?=an? |the )|means |stands for )(?P<definition>.+)$",
    re.I,
)
_TEAM_DEFINES = re.compile(
    r"^(?:(?:at work|in our team|on our team|here|for us),? )?"
    r"'?(?P<term>[A-Za-z][\w-]*(?: [\w-]+){0,2})'? (?:means|stands for) (?P<definition>.+)$",
    re.I,
)
_WE_CALL = re.compile(
    r"\bwe call (?P<definition>[^,;!?]{3,80}?) (?:an? |the )?"
    r"'?(?P<term>[A-Za-z][\w-]*(?: [\w-]+)?)'?(?: for short)?[.!]?$",
    re.I,
)
_NOT_TERMS = {
    "this",
    "that",
    "it",
    "here",
    "there",
    "these",
    "those",
    "which",
    "what",
    "one",
    "your",
    "my",
    "their",
    "something",
    "anything",
    "some",
    "best",
    "benefits",
    "name",
    "difference",
    "his",
    "her",
    "its",
    "our",
}
_FINITE_VERB = re.compile(
    r"\b(?:is|are|was|were|can|could|will|would|has|have|had|do|does|did|include|includes|may)\b",
    re.I,
)
"""An answer that is a sentence about the term, not the term's meaning ("Several factors can
increase ...")."""
_ANSWERS = re.compile(
    r"^(?:sure|yes|no|there|in|one|i|you|it|this|that|here|well|great|certainly|of course)\b",
    re.I,
)
_PRAISE = re.compile(
    r"^(?:an? |the )?(?:(?:very|really|truly|so) )?(?:great|fantastic|wonderful|excellent|"
    r"good|nice|popular|perfect|amazing|fun|delightful|brilliant|solid|lovely|awesome|thoughtful|"
    r"unique|smart|superb|terrific|classic|must|favorite|favourite|tried|top|fabulous|beautiful)\b",
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
    """``rules``: the configuration's own semantic rules, read first; they version the name."""

    capabilities = ExtractorCapabilities()
    name = NAME
    rules: Sequence[tuple[re.Pattern[str], OfflineRule]] = ()

    def __init__(self, rules: Sequence[OfflineRule] = ()) -> None:
        self.rules = [(re.compile(r.pattern, re.I), r) for r in rules]
        self.name = f"{NAME}+rules@{rules_digest(rules)}" if rules else NAME

    def summarize(self, snapshot: SnapshotContent) -> str:
        raise NotImplementedError("the offline extractor keeps the deterministic summary")

    def judge(self, text: str, existing: Candidate) -> Verdict:
        raise NotImplementedError("the offline extractor has no judge")

    def extract(self, snapshot: SnapshotContent, memory_type: MemoryType) -> list[Extracted]:
        found: list[Extracted] = list(_HANDLERS[memory_type](snapshot))
        if memory_type is MemoryType.SEMANTIC and self.rules:
            configured = list(self._configured(snapshot))
            labels = {m.label for m in configured}
            found = configured + [m for m in found if getattr(m, "label", None) not in labels]
        unique: dict[str, Extracted] = {}
        for memory in found:
            unique.setdefault(memory.model_dump_json(), memory)
        return list(unique.values())

    def _configured(self, snapshot: SnapshotContent) -> Iterator[ExtractedSemantic]:
        for _, sentence in _user_sentences(snapshot):
            for pattern, rule in self.rules:
                if match := pattern.search(sentence):
                    said = {k: v.strip() for k, v in match.groupdict(default="").items()}
                    yield ExtractedSemantic(
                        text=rule.text.format(**said), label=rule.label.format(**said)
                    )


def _user_sentences(snapshot: SnapshotContent) -> Iterator[tuple[TurnLine, str]]:
    for turn in snapshot.turns:
        if turn.role == "user":
            for sentence in _statements(turn.content):
                yield turn, sentence


def _statements(content: str) -> Iterator[str]:
    """A turn's sentences but its questions: a question states nothing."""
    held = _ABBREVIATION.sub(lambda m: m[0][:-1] + _HELD_DOT, content)
    for sentence in _SENTENCE.findall(held):
        sentence = sentence.strip().replace(_HELD_DOT, ".")
        if sentence and not sentence.endswith("?"):
            yield sentence


def _label(words: str) -> str:
    return "_".join(re.findall(r"[a-z0-9]+", words.lower()))


def semantic(snapshot: SnapshotContent) -> Iterator[ExtractedSemantic]:
    for _, sentence in _user_sentences(snapshot):
        if (match := _MY_X_IS.search(sentence)) and _stated(sentence, match):
            what = match["what"].strip().lower()
            value = _clause(match["value"])
            plural = match["verb"].lower() == "are"
            praise = _PRAISE.match(value)
            named = (
                what not in _NOT_FACTS
                and not re.search(r"\bones?$", what)
                and not _POINTS_AWAY.search(what)
            )
            if value and not praise and named and plural == what.endswith("s"):
                text = f"User's {what} {match['verb'].lower()} {value}."
                yield ExtractedSemantic(text=text, label=_label(what))
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
        if (match := _PREFER.search(sentence)) and _stated(sentence, match):
            verb = re.search(r"prefer|like|love|hate|avoid", match[0], re.I)[0].lower()  # type: ignore[index]
            what = _clause(match["what"])
            if what and not _CHOSEN.search(what):
                yield ExtractedSemantic(
                    text=f"User {verb}s {what}.", label=f"{verb}s_{_label(what)}"
                )
        if (match := _PLAN.search(sentence)) and _stated(sentence, match):
            what = _clause(match["what"] or match["what2"])
            if what and not re.search(r"\b(?:is|are|was|were)\b", what):
                yield ExtractedSemantic(
                    text=f"User plans to {what}.", label=f"plans_{_label(what)}"
                )


def _stated(sentence: str, match: re.Match[str]) -> bool:
    """Said as a fact: not hedged, wished or conditional before the match, nor inside a
    clause that asks or relates ("see where my money is going"), nor cut at a comma inside a
    list ("a soft, fluffy blanket")."""
    before, after = sentence[: match.start()], sentence[match.end() :]
    cut_in_a_list = after.startswith(",") and not _NEXT_AFTER_COMMA.match(after)
    inside_a_phrase = (word := re.search(r"\b([a-z]+)\s*$", before)) and not (
        word[1] in _LEADS_IN or word[1].endswith("ly")
    )  # "the places I plan to see": a noun before "I" makes it a relative clause
    return not (
        _UNSURE.search(before) or _RELATIVE.search(before) or cut_in_a_list or inside_a_phrase
    )


def _clause(words: str) -> str:
    """The fact's own clause, in the third person: what follows it ("... and I need help") is
    cut; a reaction to a suggestion ("that idea", "how they look") or a long clause is none."""
    text = _NEXT_CLAUSE.sub("", words.strip())
    if not text or _REACTION.match(text) or len(text) > MAX_FACT_CHARS:
        return ""
    if _POINTS_AWAY.search(text) or _SECOND_SUBJECT.search(text):
        return ""
    if text.split()[-1].lower() in _UNFINISHED or ":" in text:
        return ""
    if text.split()[0].lower() in {"better", "more", "less", "most", "much", "very", "so"}:
        return ""
    if re.fullmatch(r"\w+ing", text):
        return ""  # "my coffee is brewing": what happens now, not what is so
    return _possessives(text)


def _possessives(text: str) -> str:
    for said, meant in (
        ("I'm", "they're"),
        ("I've", "they've"),
        ("I'd", "they'd"),
        ("I'll", "they'll"),
        ("my", "their"),
        ("mine", "theirs"),
        ("me", "them"),
        ("myself", "themselves"),
    ):
        text = re.sub(rf"\b{said}\b", meant, text)
    return re.sub(r"\bI\b", "they", text)


def episodic(snapshot: SnapshotContent) -> Iterator[ExtractedEpisode]:
    for turn, said in _user_sentences(snapshot):
        first, _, rest = said.partition(";")  # "...yesterday; she confirmed it.": the event
        sentence = f"{first.rstrip()}." if rest else said
        if not _EVENT.search(sentence) or len(sentence) > 240 or _POINTS_AWAY.search(sentence):
            continue
        if _NOT_AN_EVENT.search(sentence):
            continue  # spliced statements, one that leans on the last, a thought not an event
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
    text = sentence
    for said, meant in (
        ("I'm", "User is"),
        ("I've", "User has"),
        ("I'd", "User would"),
        ("I'll", "User will"),
    ):
        text = re.sub(rf"\b{said}\b", meant, text)
    text = re.sub(r"\bI\b", "User", text)
    text = re.sub(r"\bmy\b", "their", text, flags=re.I)
    text = re.sub(r"\bme\b", "them", text)
    text = re.sub(r"^(?:Thanks|Also|So|Oh|By the way|Anyway|Actually)[,.]?\s+", "", text)
    return text[0].upper() + text[1:] if text else text


def procedural(snapshot: SnapshotContent) -> Iterator[ExtractedProcedure]:
    asked: str | None = None
    for turn in snapshot.turns:
        if turn.role == "user" and (match := _HOW.search(turn.content)):
            asked = match["name"].strip()
            continue
        if len(turn.content) > MAX_PROCEDURE_CHARS or "\n" in turn.content.strip():
            asked = None  # a guide in Markdown is not a procedure to remember
            continue
        match = _STEPS_TO.search(turn.content)
        name = match["name"].strip() if match else asked
        body = match["body"] if match else turn.content
        steps = [s.strip(" .,;") for s in _STEP_SPLIT.split(body) if s.strip(" .,;")]
        said_steps = match or re.search(r"\bthen\b|Step \d", body, re.I)
        personal = any(
            "?" in step or re.search(r"\b(?:I|my|please)\b|https?:", step, re.I) for step in steps
        )
        if name and 2 <= len(steps) <= 12 and said_steps and not personal:
            yield ExtractedProcedure(
                name=name, steps=steps, when_to_use=f"When you need to {name}."
            )
            asked = None


def taxonomic(snapshot: SnapshotContent) -> Iterator[ExtractedTerm]:
    """The user's own definitions, and the first sentence of the answer to their "What is X?"
    when it defines X; the assistant's other "X is a ..." sentences are mostly praise."""
    asked: str | None = None
    for turn in snapshot.turns:
        if turn.role == "user":
            match = _ASKS.search(turn.content)
            asked = (match["t1"] or match["t2"]).strip(" '") if match else None
            if asked and not _a_term(asked):
                asked = None  # a question about something, not what a term means
            for sentence in _statements(turn.content):
                if term := _user_term(sentence):
                    yield term
            continue
        if asked is None:
            continue
        first = next((s.strip() for s in _SENTENCE.findall(turn.content) if s.strip()), "")
        defines = _DEFINES.match(first)
        if defines is None:  # "What does SLO stand for?" "Service level objective."
            short = len(first.split()) <= 8 and not _FINITE_VERB.search(first)
            definition = first if short and not _ANSWERS.match(first) else ""
        elif defines["term"].lower() == asked.lower():
            definition = defines["definition"].strip()
        else:
            definition = ""  # it defines something else
        if _a_definition(definition):
            yield ExtractedTerm(term=asked, definition=definition)
        asked = None


def _user_term(sentence: str) -> ExtractedTerm | None:
    match = _TEAM_DEFINES.match(sentence) or _WE_CALL.search(sentence)
    if match is None or not _a_term(match["term"]):
        return None
    definition = match["definition"].strip()
    return (
        ExtractedTerm(term=match["term"], definition=definition)
        if _a_definition(definition)
        else None
    )


def _a_term(words: str) -> bool:
    """A name for something ("canary", "quiet window"), not a clause ("but if it", "what does
    it") or a sum ("2 plus 7")."""
    return (
        len(words.split()) <= 3
        and words.split()[0].lower() not in _NOT_TERMS
        and not re.search(r"\b(?:if|but|it|plus|minus|times|then|so|and|what|does)\b", words, re.I)
        and not re.fullmatch(r"[\d\s.]+", words)
    )


def _a_definition(text: str) -> bool:
    return (
        3 <= len(text) <= 300
        and not text.endswith(("!", "?", ":"))
        and "\n" not in text
        and "*" not in text
        and not _PRAISE.match(text)
        and not text.lower().startswith(("i ", "i'm", "you", "it's", "this", "that", "yes", "no"))
    )


_HANDLERS = {
    MemoryType.SEMANTIC: semantic,
    MemoryType.EPISODIC: episodic,
    MemoryType.PROCEDURAL: procedural,
    MemoryType.TAXONOMIC: taxonomic,
}
