"""An extraction handler's prompt as configuration: its text (inline or from a file beside the
project configuration) and an optional name; its version is its content's hash, so the same
words are the same version whatever they are called; and the offline extractor's own rules,
versioned the same way."""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, model_validator

DIGEST_CHARS = 12


class Prompt(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str | None = None
    file: str | None = None
    """Read when the configuration is loaded, relative to its file; ``text`` holds it after."""
    name: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Prompt:
        if self.text is None and self.file is None:
            raise ValueError("a prompt needs its text or a file")
        if self.text is not None and not self.text.strip():
            raise ValueError("a prompt's text is empty")
        return self

    @property
    def digest(self) -> str:
        if self.text is None:
            raise ValueError(f"the prompt file {self.file} was not read")
        return hashlib.sha256(self.text.encode()).hexdigest()[:DIGEST_CHARS]

    @property
    def version(self) -> str:
        """``name@digest``, or the digest alone: what every extraction records."""
        return f"{self.name}@{self.digest}" if self.name else self.digest


class OfflineRule(BaseModel):
    """A semantic fact the offline extractor reads where a user's sentence matches ``pattern``
    (a regular expression, case-insensitive): ``label`` and ``text`` are templates of its named
    groups (``{code}``). A configured rule's label wins over the built-in rules' for the same
    snapshot, so a rule can reword what they read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str
    label: str
    text: str

    @model_validator(mode="after")
    def _usable(self) -> OfflineRule:
        try:
            groups = set(re.compile(self.pattern).groupindex)
        except re.error as exc:
            raise ValueError(f"the offline rule pattern {self.pattern!r}: {exc}") from exc
        for template in (self.label, self.text):
            used = {name for _, name, _, _ in string.Formatter().parse(template) if name}
            if missing := sorted(used - groups):
                raise ValueError(
                    f"the offline rule template {template!r} names {', '.join(missing)}, "
                    f"which its pattern does not capture"
                )
        return self


def rules_digest(rules: Sequence[OfflineRule]) -> str:
    """The rules' version: the hash of what they say, in their order."""
    said = json.dumps([r.model_dump() for r in rules], sort_keys=True)
    return hashlib.sha256(said.encode()).hexdigest()[:DIGEST_CHARS]
