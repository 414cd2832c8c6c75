"""Identity fields every record carries, and the visibility of long-term memories."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

IdStr = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]


class Visibility(StrEnum):
    PRIVATE = "private"
    ORG = "org"


class Identity(BaseModel):
    """Who a record belongs to. ``org_id`` and ``project_id`` always have a value; the rest may
    be unknown for historical archives."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    org_id: IdStr
    project_id: IdStr
    user_id: IdStr | None = None
    agent_id: IdStr | None = None


class IdentityDefaults(BaseModel):
    """Identity given on the command line or as flow parameters: fills what a record lacks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    org_id: IdStr | None = None
    project_id: IdStr | None = None
    user_id: IdStr | None = None
    agent_id: IdStr | None = None
