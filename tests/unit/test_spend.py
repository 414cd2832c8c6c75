"""The spend meter (:mod:`mempipe.spend`): a process's counts per run, taken once, and given
back whole when they could not be written."""

from __future__ import annotations

import threading

from mempipe import spend
from mempipe.schemas.provider import Usage


def test_counts_are_per_run_taken_once_and_given_back_whole() -> None:
    spend.take(spend.PROCESS)
    threads = [
        threading.Thread(
            target=lambda: [
                spend.record("extraction", "m", Usage(prompt_tokens=10, completion_tokens=2), "x")
                for _ in range(100)
            ]
        )
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spend.record("embedding", "e", None)
    rows = {r.kind: r for r in spend.take(spend.PROCESS)}
    assert (rows["extraction"].requests, rows["extraction"].input_tokens) == (400, 4000)
    assert rows["extraction"].output_tokens == 800
    assert (rows["embedding"].requests, rows["embedding"].unreported) == (1, 1)
    assert spend.take(spend.PROCESS) == [], "taken once"

    spend.record("extraction", "m", Usage(prompt_tokens=1), "x")
    spend.give_back([rows["extraction"]])
    [again] = [r for r in spend.take(spend.PROCESS) if r.kind == "extraction"]
    assert (again.requests, again.input_tokens) == (401, 4001), "nothing lost, nothing doubled"
