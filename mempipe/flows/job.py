"""What every job is to the CLI runner: its request (the options of its command, the
parameters of its flow), an optional early check and plan, and the run of its flow.

Shared machinery: it knows no job. Each job's request lives in its own flow module
(``flows/reembed.py``: ``Reembed``, its plan and its flow), so that a job is found by its name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Generic, Self, TypeVar

from prefect.runtime import flow_run
from pydantic import BaseModel, ConfigDict, field_validator

from mempipe.errors import ConfigError

if TYPE_CHECKING:
    from mempipe.bootstrap import AppContext
    from mempipe.schemas.costs import RunPlan

S = TypeVar("S", bound=BaseModel)


def comma_list(value: object) -> object:
    """``a,b`` as ``["a", "b"]``; an empty text as no list."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()] or None
    return value


class Job(BaseModel, Generic[S]):
    """A job's request. ``creates_store``: the jobs that bring data in may make the store;
    ``prepares_store``: migrated and declared before the run (every job that writes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    creates_store: ClassVar[bool] = False
    prepares_store: ClassVar[bool] = True
    command_only: ClassVar[frozenset[str]] = frozenset()
    """The fields the command takes that are no parameter of the flow (a confirmation, a
    secret, a preview's): every other field is one, of the same name, type and default."""

    @classmethod
    def of_run(cls) -> Self:
        """The request of the flow run in progress: its parameters as Prefect validated them
        (a command's, a deployment's, defaults filled in), less the runner's."""
        given = flow_run.parameters
        return cls.model_validate({name: given[name] for name in cls.model_fields if name in given})

    def check(self, context: AppContext) -> None:
        """Refuse what is wrong before any server starts (an unknown model, say)."""

    def prepares(self) -> bool:
        """Whether the command prepares the store before the run (its class's
        ``prepares_store``; a request may leave it to its flow)."""
        return self.prepares_store

    def plan(self, context: AppContext) -> RunPlan:
        raise ConfigError(f"{type(self).__name__.lower()} has no --plan")

    def run(self, context: AppContext) -> S:
        raise NotImplementedError


class ListsCollections(BaseModel):
    """A request whose ``collections`` option is a comma-separated list."""

    @field_validator("collections", mode="before", check_fields=False)
    @classmethod
    def _split(cls, value: object) -> object:
        return comma_list(value)
