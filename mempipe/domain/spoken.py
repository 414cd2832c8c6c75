"""What a turn says, as search sees it: the speaker's name, where the archive gives one, is part
of the text that is indexed and embedded, so that a question about a person finds what they
said."""

from __future__ import annotations


def spoken_text(name: str | None, content: str) -> str:
    """``Name: content``, or the content alone for a turn without a name."""
    return f"{name}: {content}" if name else content
