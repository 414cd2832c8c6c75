"""Provider batches: what a run submitted to a provider's Batch API, found again by a run that
follows a killed one, so that no request is submitted twice."""

from __future__ import annotations

from typing import Any


def apply(store: Any) -> None:
    store.db["provider_batches"].create_index(
        [("job", 1), ("scope", 1), ("status", 1)], name="provider_batches_scope"
    )
