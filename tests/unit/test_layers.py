"""The architecture's direction: lower layers never import higher ones."""

from __future__ import annotations

import ast
from pathlib import Path


def test_domain_and_schemas_import_nothing_from_adapters() -> None:
    """The layers point one way: value types and pure rules never reach into adapters."""
    package = Path(__file__).parents[2] / "mempipe"
    offenders = []
    for layer in ("domain", "schemas"):
        for path in (package / layer).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "mempipe.adapters"
                ):
                    offenders.append(f"{path.name}: {node.module}")
    assert offenders == []


def _imports(path: Path) -> list[tuple[str, str]]:
    return [
        (node.module or "", alias.name)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]


def test_services_receive_a_unit_of_work_and_never_open_a_store() -> None:
    """A service reaches the store through the unit of work it is given (its repositories,
    transactions and fence), so a unit of work over a fake is enough to run it; opening one
    from a URL is the tasks' and the CLI's job."""
    services = Path(__file__).parents[2] / "mempipe" / "services"
    opened = [
        f"{path.name}: {module}.{name}"
        for path in services.glob("*.py")
        for module, name in _imports(path)
        if name in {"Store", "open_store", "unit_of_work"}
    ]
    assert opened == []
    for path in services.glob("*.py"):
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
    for path in (Path(__file__).parents[2] / "mempipe" / layer).glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for call in node.decorator_list:
                if isinstance(call, ast.Call) and getattr(call.func, "id", "") == decorator:
                    name = next(k.value.value for k in call.keywords if k.arg == "name")
                    found.append((name, node.name))
    return found


def test_flows_and_tasks_are_named_one_way() -> None:
    """A flow function is its Prefect name plus ``_flow``; a task function is its Prefect
    name; no task shares a flow's name (the Prefect UI would show two things as one)."""
    flows, tasks = _decorated("flows", "flow"), _decorated("tasks", "task")
    assert flows
    assert tasks
    assert [(n, f) for n, f in flows if f != n.replace("-", "_") + "_flow"] == []
    assert [(n, f) for n, f in tasks if f != n.replace("-", "_")] == []
    assert {n for n, _ in flows} & {n for n, _ in tasks} == set()
