"""The old model goes away halfway through a move (issue 57): the move was started with
``--bridge``, so searches during it answer through the bridge and say so, the move completes,
the gate measures the old side through the bridge and decides, and the command exits 0; the
deployment's run of the same is in ``test_deployment.py``."""

from __future__ import annotations

import json

import pytest

from tests.bridging import BATCH, NEW, check_answers, check_moved, search_through_bridge, set_scene
from tests.fakes.openai_server import fake_openai
from tests.processes import environment, start

pytestmark = [
    pytest.mark.prefect,
    pytest.mark.process("searches in this process while the move runs in its own"),
]


def test_searches_during_a_move_whose_old_model_goes_away_answer_through_its_bridge(
    prefect_server, tmp_path
) -> None:
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        gone = set_scene(tmp_path, old, old_url, new, new_url)
        move = start(
            [
                "reembed",
                "--model",
                NEW,
                "--collections",
                "stm",
                "--bridge",
                "--sample",
                "150",
                "--batch-size",
                str(BATCH),
                "--gate",
                "q.jsonl",
                "--gate-source",
                "stm",
                "--json",
            ],
            tmp_path,
            environment(prefect_server),
        )
        assert gone.wait(120), "the move reached its second batch"
        answers = search_through_bridge(tmp_path)
        assert move.poll() is None, "the searches were answered during the move"
        out, err = move.communicate(timeout=300)

    assert move.returncode == 0, err
    check_answers(answers)
    check_moved(json.loads(out))
