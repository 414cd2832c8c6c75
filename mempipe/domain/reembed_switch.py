"""When a re-embed switches what search serves, and why it does not: plain rules over the
collections' reports, so that no half-filled or unverified model is ever served."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mempipe.schemas.embedding import CollectionReport, GateReport


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
    incomplete = [r.collection for r in reports if not r.complete]
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
        if report.complete:
            continue
        missing = report.records - report.vectors - report.unembeddable
        cause = f" (the provider failed: {report.provider_error})" if report.provider_error else ""
        parts.append(f"{report.collection}: {missing} record(s) without a {what}{cause}")
    return "; ".join(parts)
