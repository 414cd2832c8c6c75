"""The README and the docs pages cannot drift: the console blocks of each page are run, in
order, in one fresh directory per page (the clone's ``examples/`` in it) as a new user would
type them, and every output they show is compared with the real one.

In a block, a line starting with ``$ `` is a command; the lines after it, up to the next command,
are what it prints on stdout (progress bars, the lines drawn with ``━``, go to stderr and are
not compared). ``…`` in a shown output stands for any text, across lines too. Run ids, memory
ids, durations, times, the host and pid, the directory the example runs in and so the padding
of columns differ from run to run: they are compared as placeholders. A block preceded by
``<!-- docs-test: skip (why) -->`` is not run (it needs a server this machine does not have).

``MEMPIPE_DOCS_UPDATE=1 pytest tests/e2e/test_examples.py`` writes what each stale command
printed into its page in place of what it showed (the directory as ``/home/ops``, the host
as ``ops-laptop``), for the author to review with ``git diff`` and to shorten again with ``…``
where a listing is long."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from mempipe.cli import cli
from tests.docs import README, ROOT, pages
from tests.helpers import invoke, noisy_lines
from tests.processes import shell

SHOWN_HOME = "/home/ops"  # where the pages' outputs say the examples ran
SHOWN_HOST = "ops-laptop"  # and on which machine

_BLOCK = re.compile(r"(<!-- docs-test: skip \(.+?\) -->\n)?```console\n(.*?)```", re.S)
_VARYING = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<run-id>"),
    (re.compile(r"mem_[0-9a-f]{24}"), "mem_<id>"),
    (re.compile(r"\b\d+(\.\d+)? s\b"), "<t> s"),
    (re.compile(r'"seconds": \d+(\.\d+)?'), '"seconds": <t>'),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00"), "<time>"),
    (re.compile(rf"{SHOWN_HOST}:\d+"), "<host>:<pid>"),
    (re.compile(r"  +"), "  "),  # a column's padding follows the widths of what varies
]


@dataclass(frozen=True)
class Step:
    command: str
    shown: str
    line: int  # of the command in its page


def steps(text: str) -> list[Step]:
    """Every command of every console block that is run, with the output the page shows."""
    found = []
    for block in _BLOCK.finditer(text):
        if block.group(1):
            continue
        first_line = text.count("\n", 0, block.start(2)) + 1
        command: str | None = None
        shown: list[str] = []
        at = first_line
        for n, line in enumerate(block.group(2).splitlines()):
            if line.startswith("$ "):
                if command is not None:
                    found.append(Step(command, "\n".join(shown), at))
                command, shown, at = line[2:], [], first_line + n
            elif "━" not in line:
                shown.append(line)
        if command is not None:
            found.append(Step(command, "\n".join(shown), at))
    return found


def walked() -> list[Path]:
    """The pages with commands to run, each a walk of its own from a fresh directory."""
    return [path for path in pages() if steps(path.read_text())]


def normalised(text: str) -> str:
    for pattern, placeholder in _VARYING:
        text = pattern.sub(placeholder, text)
    return text.rstrip()


def as_shown(printed: str, workdir: Path) -> str:
    """What a command printed in ``workdir`` on this machine, as if run where the pages'
    outputs say."""
    on_host = re.compile(rf"\b{re.escape(socket.gethostname())}(?=:\d)")
    return on_host.sub(SHOWN_HOST, printed.replace(str(workdir), SHOWN_HOME))


def matches(shown: str, printed: str, workdir: Path) -> bool:
    """Whether ``printed`` (run in ``workdir``) is what the page shows."""
    expected = normalised(shown)
    actual = normalised(as_shown(printed, workdir))
    pattern = ".*?".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, actual, re.S) is not None


def test_the_quick_start_runs_the_commands_the_worked_example_shows() -> None:
    """The quick start's one line (after the install) is commands of the README's worked
    example, in its order, which the test below runs and compares."""
    text = README.read_text()
    [line] = re.findall(
        r"^python3 -m venv .venv && .* pip install '\.\[local\]' && (.*)$", text, re.M
    )
    quick = line.split(" && ")
    run = iter(s.command for s in steps(text))
    assert all(command in run for command in quick), "in the same order"


def test_every_command_is_run_by_a_console_block_of_some_page() -> None:
    """Each command of ``mempipe`` is run somewhere in the docs (but ``server``, whose output
    names a pid and port: tests/e2e/test_session_server.py compares it)."""
    run = {
        step.command.split()[1]
        for path in pages()
        for step in steps(path.read_text())
        if step.command.startswith("mempipe ")
    }
    assert set(cli.commands) - run == {"server"}


def test_a_changed_output_line_fails_the_comparison(tmp_path) -> None:
    printed = "audit: 11 rows in 1 file(s) under /x/audit\nfailures: environmental 0, content 0\n"
    shown = (
        "audit: 11 rows in 1 file(s) under /home/ops/audit\nfailures: environmental 0, content 0"
    )
    assert matches(shown, printed.replace("/x", str(tmp_path)), tmp_path)
    assert not matches(shown.replace("11 rows", "12 rows"), printed, tmp_path)
    assert matches("audit: … rows in 1 file(s) under …", printed, tmp_path)


TUTORIAL = ROOT / "docs" / "getting-started.md"
"""Walked as a new user types it, in a shell, each command a process of its own; every other
page's commands run in this process (their shell words read by :func:`in_process`)."""


@pytest.mark.prefect
@pytest.mark.process("the tutorial as a new user types it, each command a process")
def test_the_tutorial_prints_what_it_shows(prefect_server, tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPIPE_")}
    env["PREFECT_API_URL"] = prefect_server
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["COLUMNS"] = "100"
    walk(TUTORIAL, tmp_path, lambda command: shell(command, tmp_path, env))


@pytest.mark.prefect
@pytest.mark.parametrize(
    "page", [p for p in walked() if p != TUTORIAL], ids=lambda path: str(path.relative_to(ROOT))
)
def test_every_other_page_prints_what_it_shows(page: Path, prefect_server, tmp_path) -> None:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("MEMPIPE_")}
    walk(page, tmp_path, lambda command: in_process(command, tmp_path, {**unset, "COLUMNS": "100"}))


def in_process(command: str, cwd: Path, env: dict[str, str | None]) -> Ran:
    """A page's command: ``mempipe ...`` in this process, with the shell words the pages use
    after it (``2>&1``, ``2>/dev/null``, ``|| echo "exit status $?"``); any other program in
    a shell."""
    words = shlex.split(command)
    if words[0] != "mempipe":  # the installation's programs first (a model server, say)
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        done = shell(command, cwd, {**os.environ, "PATH": path})
        return Ran(done.returncode, done.stdout, done.stderr)
    otherwise = words.index("||") if "||" in words else len(words)
    words, fallback = words[:otherwise], words[otherwise + 1 :]
    redirect = next((w for w in words if w in ("2>&1", "2>/dev/null")), None)
    result = invoke(*[w for w in words[1:] if w != redirect], cwd=cwd, env=env)
    out, err = result.stdout, result.stderr
    if redirect == "2>&1":
        out, err = out + err, ""
    elif redirect == "2>/dev/null":
        err = ""
    code = result.exit_code
    if code and fallback[:1] == ["echo"]:
        out += " ".join(fallback[1:]).replace("$?", str(code)) + "\n"
        code = 0
    return Ran(code, out, err)


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def walk(
    page: Path, workdir: Path, execute: Callable[[str], Ran | subprocess.CompletedProcess]
) -> None:
    """Each command of the page, in order, from ``workdir`` (the clone's ``examples/`` in it),
    its output compared with what the page shows."""
    shutil.copytree(ROOT / "examples", workdir / "examples")
    name = page.relative_to(ROOT)
    stale: list[str] = []
    printed: dict[int, str] = {}
    for step in steps(page.read_text()):
        done = execute(step.command)
        if done.returncode != 0:
            stale.append(f"{name}:{step.line}: $ {step.command}\n--- failed:\n{done.stderr}")
        elif noise := noisy_lines(done.stderr):
            stale.append(f"{name}:{step.line}: $ {step.command}\n--- stderr:\n{noise}")
        elif not matches(step.shown, done.stdout, workdir):
            stale.append(f"{name}:{step.line}: $ {step.command}\n--- printed:\n{done.stdout}")
            printed[step.line] = as_shown(done.stdout, workdir)
    if os.environ.get("MEMPIPE_DOCS_UPDATE"):
        update(page, printed)
    assert not stale, f"{name} shows other output than its commands print:\n" + "\n".join(stale)


def update(page: Path, printed: dict[int, str]) -> None:
    """Replace the output each stale command shows (its lines up to the next command or the
    block's end; progress bars kept) with what it printed, from the bottom up."""
    lines = page.read_text().split("\n")
    for line in sorted(printed, reverse=True):
        end = line  # lines count from 1: index ``line`` is the one after the command
        while not lines[end].startswith(("$ ", "```")):
            end += 1
        bars = [shown for shown in lines[line:end] if "━" in shown]
        lines[line:end] = bars + printed[line].rstrip("\n").split("\n")
    page.write_text("\n".join(lines))
