"""The rules of a re-embed, in one place: how the registry moves blue/green (a new model
filled beside the serving one, switched, rolled back, finalized), when a collection's vectors
are complete, and when a run switches what search serves and why it does not. Plain rules over
the registry's entries and the collections' reports, applied alike by both backends, so that no
half-filled or unverified model is ever served.

A collection's registry holds at most one serving model, the one search answers with; a
re-embed builds the next beside it (building), switches (the old one is kept as previous, so a
rollback is possible), and finalizes (the previous one's vectors go). Whatever the backend, a
plan only ever drops a model it demotes, a previous one or one still building: never the model
that serves after it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from mempipe.errors import ConfigError, StoreError
from mempipe.schemas.embedding import ModelState, RegistryEntry
from mempipe.schemas.reembed import CollectionReport, GateReport


def chosen_gate_source(named: str | None, moved: Sequence[str]) -> str:
    """The collection the recall gate searches for its queries' relevant ids: the one named;
    else the one collection a move moves; else the semantic memories. It must be among those
    moved: the gate measures the model that would serve it."""
    source = named or (moved[0] if len(moved) == 1 else "semantic")
    if source not in moved:
        which = f"--gate-source {source}" if named else f"the gate's source, {source},"
        raise ConfigError(
            f"{which} is not among the collections this re-embed moves: the gate measures the "
            "model that would serve it" + ("" if named else " (name one with --gate-source)")
        )
    return source


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


@dataclass(frozen=True)
class SwitchDecision:
    """The collections to switch to the new model, and why the rest are not (None: all done)."""

    switch: list[str]
    reason: str | None


def decide_switch(
    reports: Sequence[CollectionReport],
    building: Sequence[str],
    *,
    incremental: bool,
    gate: GateReport | None,
) -> SwitchDecision:
    """A move switches every collection at once, and only when every one is complete and the
    recall gate (where one was asked for) passed. An incremental run switches only the
    collections being built for the first time (``building``) that are complete; it is done
    when nothing lacks a vector."""
    incomplete = [r.collection for r in reports if not complete(r)]
    if incremental:
        first = [c for c in building if c not in incomplete]
        return SwitchDecision(first, missing_vectors(reports, "vector") if incomplete else None)
    if incomplete:
        return SwitchDecision([], missing_vectors(reports, "new vector"))
    if gate is not None and not gate.passed:
        return SwitchDecision([], f"recall ratio {gate.ratio} is below {gate.min_ratio}")
    return SwitchDecision([r.collection for r in reports], None)


def missing_vectors(reports: Sequence[CollectionReport], what: str) -> str:
    """Which collections lack vectors, and the provider's failure where that is why."""
    parts = []
    for report in reports:
        if complete(report):
            continue
        missing = report.records - report.vectors - report.unembeddable
        cause = f" (the provider failed: {report.provider_error})" if report.provider_error else ""
        parts.append(f"{report.collection}: {missing} record(s) without a {what}{cause}")
    return "; ".join(parts)


def complete(report: CollectionReport) -> bool:
    """Every record has a vector of the model, or its text was refused: a provider's failure
    never counts as done."""
    return report.failed == 0 and report.vectors + report.unembeddable >= report.records
