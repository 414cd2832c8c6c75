"""The embedding models mempipe can use, with what each serves in this store."""

from __future__ import annotations

from mempipe.adapters.embedding.registry import catalog
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.embedding import ModelInfo, ModelState


def list_models(uow: UnitOfWork) -> list[ModelInfo]:
    found = {
        model_id: ModelInfo(id=model_id, dimensions=d, active=False)
        for model_id, d in catalog().items()
    }
    for entry in uow.models.registry():
        model = found.setdefault(
            entry.model_id, ModelInfo(id=entry.model_id, dimensions=entry.dimensions, active=False)
        )
        if entry.state is ModelState.SERVING:
            model.active = True
            model.collections.append(entry.collection)
    for bridge in uow.models.bridges():
        if bridge.serving_model in found:
            found[bridge.serving_model].bridges.append(bridge)
    return list(found.values())
