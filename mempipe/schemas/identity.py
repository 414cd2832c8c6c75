"""Identity fields every record carries, and the visibility of long-term memories."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

IdStr = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]


class Visibility(StrEnum):
    PRIVATE = "private"
    ORG = "org"


IDENTITY_FIELDS: tuple[str, ...] = ("org_id", "project_id", "user_id", "agent_id")
"""The identity every record carries: org, project, user, agent."""


class IdentityPolicy(StrEnum):
    """What a record brought in whose own id differs from one the operator named gets
    (``--identity``; :func:`mempipe.domain.identity.settle_identity`)."""

    STRICT = "strict"
    """Rejected, the reject naming both ids: the default."""
    RECORD = "record"
    """The record's own id kept: for archives that hold many users."""
    COMMAND = "command"
    """The named id written instead of the record's."""


class IdentityDefaults(BaseModel):
    """The identity a job brings records in with: ``named`` are the fields the operator named
    (a command's option, a flow's parameter), which no record's own id replaces silently; the
    others (the environment's, the configuration's) only fill what a record lacks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    org_id: IdStr | None = None
    project_id: IdStr | None = None
    user_id: IdStr | None = None
    agent_id: IdStr | None = None
    named: frozenset[str] = frozenset()
    policy: IdentityPolicy = IdentityPolicy.STRICT

    def recorded(self) -> dict[str, str]:
        """What a run records of it: the ids it brings records in with, and its policy."""
        ids = {key: getattr(self, key) for key in IDENTITY_FIELDS if getattr(self, key)}
        return {**ids, "identity": self.policy.value}


SESSION_IDENTITY_FIELDS: tuple[str, ...] = (*IDENTITY_FIELDS, "session_id")
"""The identity of turns and snapshots, whose session is part of it."""
