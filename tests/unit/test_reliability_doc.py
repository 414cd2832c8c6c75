"""The troubleshooting page's failure table and the reliability page's fault matrix cannot
drift from the code: every error kind the CLI reports is a row of the table with its exit
code, and every test a matrix cell names exists."""

from __future__ import annotations

import re
import signal
from pathlib import Path

from mempipe.cli.options import ERROR_KINDS
from tests.docs import page

ROOT = Path(__file__).parents[2]


def failure_table() -> dict[str, str]:
    text = page("operations/troubleshooting.md")
    section = text.split("## Exit status and error kinds", 1)[1].split("\n## ", 1)[0]
    return {
        kind: exit_code
        for kind, exit_code in re.findall(r"^\| `([a-z]+)` \| ([0-9 /]+) \|", section, re.M)
    }


def test_every_error_kind_is_a_row_of_the_failure_table_with_its_exit_code() -> None:
    table = failure_table()
    kinds = {kind for _, kind in ERROR_KINDS} - {"error"}
    assert kinds | {"internal"} == set(table)
    interrupted = f"{128 + signal.SIGTERM} / {128 + signal.SIGINT}"
    assert table.pop("interrupted").strip() == interrupted
    assert {code.strip() for code in table.values()} == {"1"}


def test_every_test_the_fault_matrix_names_exists() -> None:
    matrix = page("reliability.md")
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", matrix)
    followers = re.findall(r"`::(\w+)`", matrix)
    assert len(named) >= 10
    for path, test in named:
        source = (ROOT / path).read_text()
        if test:
            assert f"def {test}(" in source, f"{path}::{test}"
    every = "".join((ROOT / path).read_text() for path, _ in named)
    for test in followers:
        assert f"def {test}(" in every, test
