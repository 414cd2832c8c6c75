"""The GPU one-shot (``bench/gpu_reembed.py``, issue 43) run small on the CPU, as the suite
can: a session lent a GPU runs the same script at a million memories, so it must work as it
is. It fills a store with real turns, moves it to each local model through the ``reembed``
flow, and prints each move's rate beside the model's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.processes import environment, script

ROOT = Path(__file__).parents[2]
DATA = ROOT.parent / "shared" / "data" / "longmemeval-dev"
RATE = re.compile(
    r"^(?P<model>\S+): reembed of (?P<n>[\d,]+) memories in [\d.]+ s \([\d,]+/s\); "
    r"the model alone [\d,]+ texts/s on [\d,]+; ratio (?P<ratio>[\d.]+)$",
    re.M,
)


MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")


@pytest.mark.skipif(not DATA.exists(), reason="the LongMemEval dev set is not beside the checkout")
@pytest.mark.process("the bench script as a session lent a GPU runs it")
def test_the_gpu_script_moves_real_text_and_prints_its_rates(prefect_server, tmp_path) -> None:
    """Both local models in one run, as the GPU session runs them (one process: the script's
    start and the store's fill are paid once), against the session's Prefect server (a
    temporary one of its own would cost as much as the moves)."""
    done = script(
        [
            str(ROOT / "bench" / "gpu_reembed.py"),
            "--memories",
            "16",
            "--models",
            ",".join(MODELS),
            "--batch-size",
            "64",
            "--out",
            str(tmp_path),
        ],
        environment(prefect_server, MEMPIPE_LOCAL_DEVICE="cpu"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = list(RATE.finditer(done.stdout))
    assert [f["model"] for f in found] == list(MODELS)
    assert all(int(f["n"].replace(",", "")) == 16 for f in found)
    assert all(float(f["ratio"]) > 0 for f in found)
    assert "device cpu" in done.stdout
