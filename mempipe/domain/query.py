"""A free-text query's words, as the text indexes are asked for them.

Stop words are Lucene's English set, the one Atlas Search's ``lucene.english`` analyzer drops,
so that both backends match on the same words.
"""

from __future__ import annotations

import re

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)


def words(text: str) -> list[str]:
    """The query's distinct words, lower-cased, in order."""
    return list(dict.fromkeys(re.findall(r"\w+", text.lower())))


def query_words(text: str) -> list[str]:
    """The words a text search matches: the query's words without the stop words."""
    return [word for word in words(text) if word not in STOP_WORDS]
