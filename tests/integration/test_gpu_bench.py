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


@pytest.mark.skipif(not DATA.exists(), reason="the LongMemEval dev set is not beside the checkout")
@pytest.mark.parametrize(
    ("model", "memories"), [("all-MiniLM-L6-v2", 32), ("multilingual-e5-small", 4)]
)
@pytest.mark.process("the bench script as a session lent a GPU runs it")
def test_the_gpu_script_moves_real_text_and_prints_its_rates(tmp_path, model, memories) -> None:
    done = script(
        [
            str(ROOT / "bench" / "gpu_reembed.py"),
            "--memories",
            str(memories),
            "--models",
            model,
            "--batch-size",
            "64",
            "--out",
            str(tmp_path),
        ],
        environment(None, MEMPIPE_LOCAL_DEVICE="cpu"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [found] = RATE.finditer(done.stdout)
    assert found["model"] == model
    assert int(found["n"].replace(",", "")) == memories
    assert float(found["ratio"]) > 0
    assert "device cpu" in done.stdout
