"""ARCHITECTURE.md's map, pinned: every arrow of its diagram is an import rule checked here, a
job is found by its name and meets other jobs only through the seams named below, the store is
given by one injector, and the upper floors stay short."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "mempipe"

ALLOWED: dict[str, set[str]] = {
    "cli": {"flows", "services", "bootstrap", "adapters", "archives", "domain", "schemas"},
    "flows": {"tasks", "services", "bootstrap", "adapters", "archives", "domain", "schemas"},
    "tasks": {"services", "bootstrap", "adapters", "archives", "migrations", "domain", "schemas"},
    "bootstrap": {"adapters", "domain", "schemas"},
    "services": {"adapters", "archives", "migrations", "domain", "schemas"},
    "adapters": {"migrations", "domain", "schemas"},
    "archives": {"domain", "schemas"},
    "migrations": {"schemas"},
    "domain": {"schemas"},
    "schemas": {"domain"},
}
"""The layers each layer may import (besides itself and the small modules every layer shares:
errors, redaction, credentials, settings, interrupts, progress, ...). The diagram of
ARCHITECTURE.md draws exactly these."""

WITHOUT_PREFECT = ("services", "domain", "schemas", "archives", "migrations")
"""Plain Python: a service, a rule, a model, a reader or a migration runs without Prefect."""

JOB_OF = {
    "memory_import": "import_",
    "bundle_import": "import_",
    "bundle_vectors": "export",
    "evaluation": "eval",
}
"""A job's modules whose file is not named after it (a job with several has a package)."""
JOBS = {
    "backfill",
    "promote",
    "replay",
    "report",
    "reembed",
    "indexes",
    "copy",
    "export",
    "import_",
    "erase",
    "forget",
    "eval",
}

SEAMS: dict[tuple[str, str], str] = {
    ("backfill", "promote"): "a backfill ends with the promote job's task",
    ("backfill", "reembed"): "`backfill --embed` runs the incremental re-embed as a subflow",
    ("replay", "report"): "a replay exports its audit through the report job's task",
    ("import_", "report"): "an import exports its audit through the report job's task",
    ("import_", "replay"): "an import reconciles memories as a replay does",
    ("reembed", "eval"): "the recall gate scores labelled queries as `mempipe eval` does",
    ("reembed", "report"): "a move's preview page is drawn in the report page's style",
    ("erase", "report"): "an erase redacts the report pages the store wrote",
    ("forget", "report"): "a forget redacts its memories' text in the report pages the store wrote",
    ("import_", "export"): "a bundle is read as an export writes it (records, digests, vectors)",
    ("copy", "export"): "a copy is verified by the export's digests",
    ("copy", "import_"): "a copy writes records as a bundle import does",
    ("report", "export"): "the report page reads the store's records as an export does",
}
"""Where one job uses another, and why: nothing else of a job reaches into another's."""


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "mempipe" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in ALLOWED else None


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found.append((".".join(parts[:-1] if parts[-1] == "__init__" else parts), path))
    return found


def _imported(path: Path) -> list[tuple[str, list[str]]]:
    """Every module a file imports, at the top or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
    return found


def test_every_import_follows_an_arrow_of_the_diagram() -> None:
    crossing = [
        f"{module} imports {target}"
        for module, path in _modules()
        if (source := _layer(module)) is not None
        for target, _ in _imported(path)
        if (layer := _layer(target)) not in (None, source) and layer not in ALLOWED[source]
    ]
    assert crossing == []


def test_the_diagram_draws_the_rules() -> None:
    """Each arrow of ARCHITECTURE.md's layer table names what its layer may import."""
    doc = (ROOT / "ARCHITECTURE.md").read_text()
    drawn = {
        layer: {name.strip("`/ ") for name in imports.split(",") if name.strip()}
        for layer, imports in re.findall(r"^\| `(\w+)/?` \| [^|]+ \| ([^|]*) \|", doc, re.M)
    }
    assert {layer: drawn.get(layer) for layer in ALLOWED} == ALLOWED


def test_nothing_imports_the_cli() -> None:
    reaching = [
        module
        for module, path in _modules()
        if not module.startswith(("mempipe.cli", "mempipe.__main__"))
        for target, _ in _imported(path)
        if target.startswith("mempipe.cli")
    ]
    assert reaching == []


def test_services_rules_models_readers_and_migrations_import_no_prefect() -> None:
    importing = [
        module
        for module, path in _modules()
        if _layer(module) in WITHOUT_PREFECT
        for target, _ in _imported(path)
        if target.split(".")[0] in ("prefect", "prefect_dask")
    ]
    assert importing == []


def _job(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in ("flows", "tasks", "services"):
        return None
    job = JOB_OF.get(parts[2], parts[2])
    return job if job in JOBS else None


def test_jobs_meet_only_through_named_seams() -> None:
    met = {
        (source, target): f"{module} imports {imported}"
        for module, path in _modules()
        if (source := _job(module)) is not None
        for imported, _ in _imported(path)
        if (target := _job(imported)) not in (None, source)
    }
    assert {pair: met[pair] for pair in set(met) - set(SEAMS)} == {}
    assert set(SEAMS) - set(met) == set(), "a seam no longer used: take it off the list"


def test_each_job_is_found_by_its_name_on_each_floor() -> None:
    """A job's flow is ``flows/<job>.py``; no module of the upper floors holds every job's
    plans, requests or commands' wiring."""
    flows = {path.stem for path in (PACKAGE / "flows").glob("*.py")}
    assert JOBS - {"eval"} <= flows, JOBS - flows
    for floor in ("flows", "tasks", "services", "cli"):
        assert not (PACKAGE / floor / "plans.py").exists()


def test_a_store_is_opened_from_its_url_in_one_way_where_the_reader_sees_it() -> None:
    """Outside the store's own package, a store is opened from its public URL by
    ``unit_of_work(url)`` alone, in the body of the step that works on it (as a cosmicpython
    handler is handed its ``uow``), never by ``open_store`` or a ``UnitOfWork`` made by hand
    (``bootstrap.prepare_store``, which migrates, aside); no signature is rewritten to hide it."""
    made = [
        f"{module}: {node.func.id}"  # type: ignore[attr-defined]
        for module, path in _modules()
        if not module.startswith("mempipe.adapters.store")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", "") in ("open_store", "UnitOfWork")
    ]
    assert made == ["mempipe.bootstrap: open_store"], "prepare_store migrates: the one other"
    import importlib
    import inspect

    from prefect import Task

    tasks = [
        value
        for module, _ in _modules()
        if module.startswith("mempipe.tasks")
        for value in vars(importlib.import_module(module)).values()
        if isinstance(value, Task)
    ]
    assert tasks, "the tasks were found"
    for task in tasks:
        code = task.fn.__code__
        own = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
        assert list(inspect.signature(task.fn).parameters) == own, task.name
        assert "uow" not in own, f"{task.name} takes the store's URL and opens it in its body"


def _functions(floor: str, decorated: str | None = None) -> list[tuple[str, int]]:
    found = []
    for path in (PACKAGE / floor).glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            names = [ast.unparse(d) for d in node.decorator_list]
            if decorated is None or any(decorated in name for name in names):
                found.append((f"{path.name}:{node.name}", node.end_lineno - node.lineno + 1))
    return found


def test_a_command_is_its_options_and_one_call_and_a_flow_a_short_recipe() -> None:
    commands = [
        (name, lines)
        for name, lines in _functions("cli", "command")
        if lines > 30 and not name.startswith("session_server")
    ]
    assert commands == [], "a CLI command is at most 30 lines"
    flows = [(name, lines) for name, lines in _functions("flows", "flow") if lines > 40]
    assert flows == [], "a flow function is at most 40 lines"


def _imports(path: Path) -> list[tuple[str, str]]:
    return [
        (node.module or "", alias.name)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]


def test_services_receive_a_unit_of_work_and_never_open_a_store() -> None:
    """A service reaches the store through the unit of work it is given (its repositories,
    transactions and fence), so a unit of work over a fake is enough to run it."""
    services = PACKAGE / "services"
    opened = [
        f"{path.name}: {module}.{name}"
        for path in services.rglob("*.py")
        for module, name in _imports(path)
        if name in {"Store", "open_store", "unit_of_work"}
    ]
    assert opened == []
    for path in services.rglob("*.py"):
        tree = ast.parse(path.read_text())
        takes_store = [
            f"{path.name}: {node.name}({arg.arg})"
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef)
            for arg in node.args.args
            if arg.arg == "store"
        ]
        assert takes_store == []


def _decorated(layer: str, decorator: str) -> list[tuple[str, str]]:
    """(Prefect name, function name) of every ``@decorator(name=...)`` function in the layer."""
    found = []
    for path in (PACKAGE / layer).glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for call in node.decorator_list:
                if isinstance(call, ast.Call) and getattr(call.func, "id", "") == decorator:
                    named = [k.value for k in call.keywords if k.arg == "name"] or call.args[:1]
                    found.append((named[0].value, node.name))
    return found


def test_flows_and_tasks_are_named_one_way() -> None:
    """A flow function is its Prefect name plus ``_flow``; a task function is its Prefect
    name; no task shares a flow's name (the Prefect UI would show two things as one)."""
    flows, tasks = _decorated("flows", "job_flow"), _decorated("tasks", "step")
    assert flows
    assert tasks
    assert [(n, f) for n, f in flows if f != n.replace("-", "_") + "_flow"] == []
    assert [(n, f) for n, f in tasks if f != n.replace("-", "_")] == []
    assert {n for n, _ in flows} & {n for n, _ in tasks} == set()
