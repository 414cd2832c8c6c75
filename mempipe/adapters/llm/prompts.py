"""One prompt per handler: each reads the whole snapshot and looks only for its own kind. These
are the built-in ones; the project configuration can give a handler its own
(``memory.extraction.prompts``)."""

from __future__ import annotations

from mempipe.schemas.memory import MemoryType
from mempipe.schemas.prompts import Prompt
from mempipe.schemas.replay import LLMSettings

COMMON = (
    "You read a conversation between a user and an assistant and extract durable long-term "
    "memory of ONE kind only. Ignore every other kind. Answer with JSON only, of the form "
    '{"memories": [...]}; an empty list when there is nothing of this kind.'
)

PROMPTS: dict[MemoryType, str] = {
    MemoryType.SEMANTIC: (
        "Kind: semantic facts and preferences about the user that stay true beyond this "
        "conversation. Each item: text (one sentence, third person, e.g. \"User's home airport "
        'is LIS.") and label (a short snake_case name of what the fact is about, e.g. '
        '"home_airport", the same label whenever the same attribute is meant).'
    ),
    MemoryType.EPISODIC: (
        "Kind: episodic events - things that happened, with who took part and when. Each item: "
        "summary (one or two sentences), participants (names), occurred_at (ISO 8601 or null)."
    ),
    MemoryType.PROCEDURAL: (
        "Kind: procedural how-tos the conversation demonstrated. Each item: name (short, "
        "lowercase, what the procedure achieves), steps (ordered list), when_to_use."
    ),
    MemoryType.TAXONOMIC: (
        "Kind: taxonomic domain terms and their definitions. Each item: term (lowercase), "
        "definition, domain (or null)."
    ),
}

BUILT_IN = "built-in"
BUILT_IN_PROMPTS = {
    memory_type: Prompt(text=f"{COMMON}\n\n{text}", name=BUILT_IN)
    for memory_type, text in PROMPTS.items()
}


def prompt_for(settings: LLMSettings, memory_type: MemoryType) -> Prompt:
    """The handler's configured prompt, else the built-in one (named ``built-in``)."""
    return settings.prompts.get(memory_type) or BUILT_IN_PROMPTS[memory_type]


REPAIR = (
    "Your previous answer did not validate against the required JSON schema: {problem}. "
    'Answer again with JSON only, of the form {{"memories": [...]}}.'
)

SUMMARY = (
    "Summarise this conversation in at most two sentences, in the third person, keeping names, "
    "places and decisions. Answer with the summary only."
)

JUDGE = (
    "An existing memory and a newly extracted one are similar. Answer with exactly one word: "
    "UPDATE if the new memory replaces the existing one (the same attribute with a new value), "
    "REINFORCE if it restates the existing one, ADD if it is a different memory.\n\n"
    "Existing: {existing}\nNew: {new}"
)
