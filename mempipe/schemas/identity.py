"""Identity fields every record carries, and the visibility of long-term memories."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

IdStr = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]


class Visibility(StrEnum):
    PRIVATE = "private"
    ORG = "org"


class IdentityDefaults(BaseModel):
    """Identity given on the command line or as flow parameters: fills what a record lacks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    org_id: IdStr | None = None
    project_id: IdStr | None = None
    user_id: IdStr | None = None
    agent_id: IdStr | None = None


IDENTITY_FIELDS: tuple[str, ...] = tuple(IdentityDefaults.model_fields)
"""The identity every record carries: org, project, user, agent."""
SESSION_IDENTITY_FIELDS: tuple[str, ...] = (*IDENTITY_FIELDS, "session_id")
"""The identity of turns and snapshots, whose session is part of it."""
