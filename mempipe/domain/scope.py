"""The scope a long-term memory is reconciled in, from its identity and visibility.

A private memory belongs to its user: its scope includes the user. An org-visible memory is
shared inside its project: its scope leaves the user out. Visibility never crosses a project. A
memory is reconciled among its own agent's memories, and one without an agent among those
without one: so the order in which records arrive never decides what is merged.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from mempipe.schemas.identity import Visibility


class Scope(BaseModel):
    model_config = ConfigDict(frozen=True)

    org_id: str
    project_id: str
    user_id: str | None
    agent_id: str | None
    visibility: Visibility


def scope_of(
    org_id: str, project_id: str, user_id: str | None, agent_id: str | None, visibility: Visibility
) -> Scope:
    owner = user_id if visibility is Visibility.PRIVATE else None
    return Scope(
        org_id=org_id,
        project_id=project_id,
        user_id=owner,
        agent_id=agent_id,
        visibility=visibility,
    )
