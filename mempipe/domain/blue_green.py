"""The blue/green rules of a model change, as one plan both backends apply.

A collection's registry holds at most one serving model, the one search answers with; a
re-embed builds the next beside it (building), switches (the old one is kept as previous, so a
rollback is possible), and finalizes (the previous one's vectors go). Whatever the backend, a
plan only ever drops a model it demotes, a previous one or one still building: never the model
that serves after it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from mempipe.errors import StoreError
from mempipe.schemas.embedding import ModelState, RegistryEntry


class RegistryChange(BaseModel):
    """One collection's move: ``serve`` starts serving, the models serving before it become
    ``demote_to``, then the vectors and index of each model in ``drop`` go. The state change is
    applied first (atomically where the backend can), the drops after it."""

    model_config = ConfigDict(frozen=True)

    collection: str
    serve: str | None = None
    demoted: tuple[str, ...] = ()
    demote_to: ModelState | None = None
    drop: tuple[str, ...] = ()


def _in_state(entries: Sequence[RegistryEntry], state: ModelState) -> list[str]:
    return [e.model_id for e in entries if e.state is state]


def switch_plan(collection: str, entries: Sequence[RegistryEntry], model_id: str) -> RegistryChange:
    """``model_id`` starts serving; the model serving now is kept as previous."""
    if model_id not in {e.model_id for e in entries}:
        raise StoreError(f"{collection}: no vectors of {model_id} to switch to")
    demoted = tuple(m for m in _in_state(entries, ModelState.SERVING) if m != model_id)
    return RegistryChange(
        collection=collection,
        serve=model_id,
        demoted=demoted,
        demote_to=ModelState.PREVIOUS if demoted else None,
    )


def rollback_plan(collection: str, entries: Sequence[RegistryEntry]) -> RegistryChange | None:
    """The previous model serves again and the newer vectors go; without a previous model, the
    vectors of a move that never switched (building) go. None: nothing to roll back."""
    previous = _in_state(entries, ModelState.PREVIOUS)
    if not previous:
        building = tuple(_in_state(entries, ModelState.BUILDING))
        if not building:
            return None
        return RegistryChange(collection=collection, drop=building)
    serving = _in_state(entries, ModelState.SERVING)
    return RegistryChange(
        collection=collection,
        serve=previous[0],
        demoted=tuple(serving),
        demote_to=ModelState.BUILDING if serving else None,
        drop=tuple(serving[-1:]),
    )


def finalize_plan(collection: str, entries: Sequence[RegistryEntry]) -> RegistryChange | None:
    """The previous model's vectors go: a rollback is no longer possible."""
    previous = _in_state(entries, ModelState.PREVIOUS)
    if not previous:
        return None
    return RegistryChange(collection=collection, drop=(previous[0],))
