"""The blue/green rules both backends apply (mempipe.domain.reembed)."""

from __future__ import annotations

from itertools import product

import pytest

from mempipe.domain.reembed import chosen_gate_source, finalize_plan, rollback_plan, switch_plan
from mempipe.errors import ConfigError, StoreError
from mempipe.schemas.embedding import ModelState, RegistryEntry


def entries(**states: ModelState) -> list[RegistryEntry]:
    return [
        RegistryEntry(
            collection="semantic", model_id=m, dimensions=4, state=s, vector_table=f"v_{m}"
        )
        for m, s in states.items()
    ]


SERVING, BUILDING, PREVIOUS = ModelState.SERVING, ModelState.BUILDING, ModelState.PREVIOUS


def test_a_switch_serves_the_new_model_and_keeps_the_old_as_previous() -> None:
    change = switch_plan("semantic", entries(a=SERVING, b=BUILDING), "b")
    assert (change.serve, change.demoted, change.demote_to, change.drop) == (
        "b",
        ("a",),
        PREVIOUS,
        (),
    )


def test_the_first_switch_of_a_collection_demotes_nothing() -> None:
    change = switch_plan("semantic", entries(b=BUILDING), "b")
    assert (change.serve, change.demoted, change.drop) == ("b", (), ())


def test_a_switch_to_an_unregistered_model_is_refused() -> None:
    with pytest.raises(StoreError, match="no vectors of c to switch to"):
        switch_plan("semantic", entries(a=SERVING), "c")


def test_a_rollback_restores_the_previous_model_and_drops_the_newer() -> None:
    change = rollback_plan("semantic", entries(a=PREVIOUS, b=SERVING))
    assert change is not None
    assert (change.serve, change.demoted, change.demote_to, change.drop) == (
        "a",
        ("b",),
        BUILDING,
        ("b",),
    )


def test_a_rollback_without_a_previous_model_drops_only_what_was_building() -> None:
    change = rollback_plan("semantic", entries(a=SERVING, b=BUILDING))
    assert change is not None
    assert (change.serve, change.drop) == (None, ("b",))
    assert rollback_plan("semantic", entries(a=SERVING)) is None


def test_finalize_drops_the_previous_model_only() -> None:
    change = finalize_plan("semantic", entries(a=PREVIOUS, b=SERVING))
    assert change is not None
    assert change.drop == ("a",)
    assert finalize_plan("semantic", entries(b=SERVING)) is None


def test_no_plan_ever_drops_a_model_that_serves_after_it_and_one_model_serves() -> None:
    """Every registry of up to three models in any states, every move."""
    for states in product([None, *ModelState], repeat=3):
        registry = entries(**{m: s for m, s in zip("abc", states, strict=True) if s is not None})
        plans = [rollback_plan("semantic", registry), finalize_plan("semantic", registry)]
        plans += [switch_plan("semantic", registry, e.model_id) for e in registry]
        for plan in filter(None, plans):
            still = {e.model_id for e in registry if e.state is SERVING} - set(plan.demoted)
            serving_after = still | ({plan.serve} if plan.serve else set())
            assert not serving_after & set(plan.drop), (states, plan)
            if plan.serve:
                assert serving_after == {plan.serve}, (states, plan)


@pytest.mark.parametrize(
    ("named", "moved", "source"),
    [
        (None, ["stm"], "stm"),
        (None, ["episodic"], "episodic"),
        (None, ["stm", "semantic"], "semantic"),
        ("stm", ["stm", "semantic"], "stm"),
    ],
)
def test_the_gate_searches_the_collection_named_else_the_one_moved_else_semantic(
    named, moved, source
) -> None:
    assert chosen_gate_source(named, moved) == source


def test_a_gate_whose_source_the_move_leaves_alone_is_refused_saying_which() -> None:
    with pytest.raises(ConfigError, match="--gate-source stm is not among"):
        chosen_gate_source("stm", ["semantic"])
    with pytest.raises(
        ConfigError, match=r"the gate's source, semantic, is not among.*--gate-source"
    ):
        chosen_gate_source(None, ["stm", "episodic"])
