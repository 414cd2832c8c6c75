"""ARCHITECTURE.md stays the true map: its repository table lists every port of the store with
exactly the methods the port declares, under the unit of work's attribute that hands it out."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _ports() -> dict[str, list[str]]:
    tree = ast.parse((ROOT / "mempipe" / "adapters" / "store" / "base.py").read_text())
    return {
        node.name: [b.name for b in node.body if isinstance(b, ast.FunctionDef)]
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(getattr(base, "id", "") == "Protocol" for base in node.bases)
        and node.name != "Store"
    }


def _handed_out() -> dict[str, str]:
    """Port name -> the unit of work's attribute typed as it."""
    tree = ast.parse((ROOT / "mempipe" / "adapters" / "store" / "unit_of_work.py").read_text())
    return {
        node.annotation.id: node.target.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute)
    }


def test_the_repository_table_lists_every_port_and_its_methods() -> None:
    doc = (ROOT / "ARCHITECTURE.md").read_text()
    rows = {
        port: (attribute, re.findall(r"`(\w+)`", methods))
        for attribute, port, methods in re.findall(
            r"^\| `uow\.(\w+)` \| `(\w+)` \| ([^|]+) \|", doc, flags=re.MULTILINE
        )
    }
    ports = _ports()
    assert set(rows) == set(ports)
    attributes = _handed_out()
    for port, methods in ports.items():
        assert rows[port] == (attributes[port], methods), port


def _glossary() -> list[tuple[str, str]]:
    doc = (ROOT / "ARCHITECTURE.md").read_text()
    section = doc.split("## Glossary", 1)[1]
    return re.findall(r"^\| ([^|]+) \| [^|]+ \| ([^|]+) \|$", section, flags=re.MULTILINE)[2:]


def _configured(key: str) -> bool:
    """Whether ``key`` (``memory.extraction.prompts``) is a key of the project configuration."""
    from pydantic import BaseModel

    from mempipe.schemas.config import ProjectConfig

    model: type[BaseModel] | None = ProjectConfig
    for part in key.split("."):
        if model is None or part not in model.model_fields:
            return False
        annotation = model.model_fields[part].annotation
        nested = isinstance(annotation, type) and issubclass(annotation, BaseModel)
        model = annotation if nested else None
    return True


@cache
def _source() -> str:
    """Every module of the package, as one text: what a bare class name is looked up in."""
    return "\n".join(p.read_text() for p in (ROOT / "mempipe").rglob("*.py"))


@cache
def _environment() -> set[str]:
    """The environment variables mempipe's settings read."""
    from pydantic_settings import BaseSettings

    from mempipe import settings

    models = [m for m in vars(settings).values() if isinstance(m, type)]
    return {
        m.model_config.get("env_prefix", "") + name.upper()
        for m in models
        if issubclass(m, BaseSettings)
        for name in m.model_fields
    }


def _defined(name: str) -> bool:
    """Whether the tree defines ``name``: a module or an attribute of one (``schemas.turn.Turn``),
    a class (``RunLog``) or a class's member (``RunLog.add_spend``), a configuration key
    (``memory.vector_index``), an environment variable or constant it reads (``MEMPIPE_...``)."""
    import importlib

    source = _source()
    if re.fullmatch(r"[A-Z][A-Z0-9_]+", name):
        return name in _environment() or re.search(rf"\b{name}\b", source) is not None
    if name.startswith(("memory.", "costs.")):
        return _configured(name)
    parts = name.removeprefix("mempipe.").split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module("mempipe." + ".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        try:
            for attribute in parts[cut:]:
                found = getattr(found, attribute)
        except AttributeError:
            return False
        return True
    owner, _, member = name.partition(".")
    body = re.search(rf"^class {owner}\b.*?(?=^class |\Z)", source, re.MULTILINE | re.DOTALL)
    return body is not None and (not member or re.search(rf"\b{member}\b", body[0]) is not None)


def test_the_glossary_names_what_the_tree_defines() -> None:
    """Each dotted or class name of the glossary's "in code" column is in the tree (a module
    moved or renamed leaves its term pointing nowhere), and each file it names is there."""
    missing = []
    for term, in_code in _glossary():
        for name in re.findall(r"`([^`]+)`", in_code):
            if "/" in name:
                where = ROOT if name.startswith("tests/") else ROOT / "mempipe"
                module, _, attribute = name.rstrip("/").partition(".")
                path = where / (f"{module}.py" if attribute not in ("", "py") else name)
                if "<" not in name and not path.exists():
                    missing.append((term, name))
            elif (
                re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+|[A-Z]\w+", name)
                and not name.startswith("uow.")
                and not _defined(name)
            ):
                missing.append((term, name))
    assert missing == []


def _job_table() -> list[list[str]]:
    doc = (ROOT / "ARCHITECTURE.md").read_text()
    table = doc.split("| job | command | flow | tasks | services | domain, schemas |\n", 1)[1]
    lines = table.split("\n\n", 1)[0].splitlines()[1:]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def _shared(floor: str) -> set[str]:
    """The modules the layers table names as a floor's shared machinery."""
    layers = (ROOT / "ARCHITECTURE.md").read_text().split("## The layers", 1)[1]
    row = layers.split(f"| `{floor}/` |", 1)[1].split("\n", 1)[0]
    return set(re.findall(r"`(\w+)`", row))


def test_the_job_table_is_the_tree() -> None:
    """Every file the job and floor table names is there (a bare name is of the floor's
    folder), and every module of flows/, tasks/ and services/ is a job's or is named shared
    machinery in the layers table."""
    named: set[str] = set()
    floors = ("cli", "flows", "tasks", "services", "domain")
    for row in _job_table():
        for floor, cell in zip(floors, row[1:], strict=True):
            package = re.match(r"`(\w+/\w+/)`", cell)
            for name in re.findall(r"`([^`]+\.py)`", cell):
                folder = package[1] if package else f"{floor}/"
                path = name if "/" in name else folder + name
                assert (ROOT / "mempipe" / path).exists(), f"{row[0]}: {path}"
                named.add(path)
            if package:
                listed = {p for p in named if p.startswith(package[1])}
                held = {
                    f"{package[1]}{p.name}"
                    for p in (ROOT / "mempipe" / package[1]).glob("*.py")
                    if p.stem != "__init__"
                }
                assert listed == held, f"{row[0]}: the table lists {package[1]} whole"
    unplaced = [
        f"{floor}/{module.name}"
        for floor in ("flows", "tasks", "services")
        for module in sorted((ROOT / "mempipe" / floor).glob("*.py"))
        if module.stem != "__init__"
        and f"{floor}/{module.name}" not in named
        and module.stem not in _shared(floor)
    ]
    assert unplaced == []
