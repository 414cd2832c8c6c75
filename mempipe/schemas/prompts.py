"""An extraction handler's prompt as configuration: its text (inline or from a file beside the
project configuration) and an optional name; its version is its content's hash, so the same
words are the same version whatever they are called."""

from __future__ import annotations

import hashlib

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
