"""The floor plan, checked from the source: no import circles, library code never imports
command-line modules, single-process code never imports ``horovod_jobs`` or Horovod, every
package imports only what its docstring's ``May import:`` line allows, ``tfnhr/``'s top level
holds only packages and its few core modules, and the modules that must load without TensorFlow
do."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.environment import REPO

PACKAGES = ("tfnhr", "capsnet", "horovod_jobs")
ENTRY_POINTS = {"tfnhr.cli", "capsnet.cli", "capsnet.__main__", "tfnhr.commands.main_job", "horovod_jobs.train",
                "horovod_jobs.demo", "horovod_jobs.smoke"}
"""Modules run as programs: like ``commands/`` modules they only wire the library together."""


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in (REPO / package).rglob("*.py")}


def imports(path: Path, modules: dict[str, Path], top_level_only: bool) -> set[str]:
    """Project modules that ``path`` imports (at module level only, if asked: an optional import
    in a module-level ``try`` counts; ``TYPE_CHECKING`` blocks do not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = ([node for statement in tree.body
              for node in (statement.body if isinstance(statement, ast.Try) else [statement])]
             if top_level_only else list(ast.walk(tree)))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def is_wiring(name: str) -> bool:
    return name in ENTRY_POINTS or ".commands" in name


def test_no_import_circle_between_project_modules():
    modules = project_modules()
    graph = {name: imports(path, modules, top_level_only=True) - {name} for name, path in modules.items()}
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                pytest.fail("import circle: " + " -> ".join(trail[trail.index(target):] + [target]))
            if target not in state:
                visit(target, trail + [target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_library_never_imports_command_line_modules_or_horovod_jobs():
    modules = project_modules()
    offenders = []
    for name, path in modules.items():
        if is_wiring(name):
            continue
        for target in imports(path, modules, top_level_only=False):
            if is_wiring(target) or (not name.startswith("horovod_jobs") and target.startswith("horovod_jobs")):
                offenders.append(f"{name} imports {target}")
    assert not offenders, offenders


def test_library_imports_only_at_the_top():
    """Laziness lives in the command-line modules; library modules import what they need at the top."""
    modules = project_modules()
    lazy = [f"{name} imports {target}" for name, path in modules.items() if not is_wiring(name)
            for target in imports(path, modules, top_level_only=False) - imports(path, modules, top_level_only=True)]
    assert not lazy, lazy


TOP_LEVEL_MODULES = {"__init__.py", "cli.py", "charset.py"}
"""The only modules at the top of ``tfnhr/``: everything else lives in a package named for its role."""


def owner(name: str, modules: dict[str, Path]) -> str:
    """The part of the project a module belongs to: its package, or itself for a module at the
    top of ``tfnhr/`` (``tfnhr.charset``)."""
    if modules[name].name == "__init__.py":
        return name
    parent = name.rsplit(".", 1)[0]
    while parent not in modules:  # a script in a data folder: the package around it
        parent = parent.rsplit(".", 1)[0]
    return name if parent == "tfnhr" else parent


def allowed_imports(package: str, modules: dict[str, Path]) -> set[str] | None:
    """The parts named by the ``May import:`` line of ``package``'s docstring (``set()`` for
    "nothing ..."; ``None`` for "anything ..."); ``AssertionError`` when it has none."""
    doc = ast.get_docstring(ast.parse(modules[package].read_text(encoding="utf-8"))) or ""
    match = re.search(r"^May import: (.+?)\.$", doc, re.MULTILINE | re.DOTALL)
    assert match, f"{package}: its docstring has no 'May import: ...' line"
    rule = " ".join(match.group(1).split())
    if rule.startswith("anything"):
        return None
    if rule.startswith("nothing"):
        return set()
    return {part.split(" ")[0] for part in rule.split(", ")}


def test_top_level_of_tfnhr_holds_only_packages_and_core_modules():
    stray = sorted(path.name for path in (REPO / "tfnhr").glob("*.py") if path.name not in TOP_LEVEL_MODULES)
    assert not stray, f"modules at the top of tfnhr/ that belong in a package: {stray}"


def test_every_package_says_what_it_may_import_and_keeps_to_it():
    """Each package (and top-level module) imports only itself, its own sub-packages, the root
    ``tfnhr`` (its version) and what its ``May import:`` line names; ``tfnhr.data`` may import its
    sub-packages, "tfnhr and capsnet" allows every part of those but their command lines."""
    modules = project_modules()
    offenders = []
    for name, path in sorted(modules.items()):
        if name in ENTRY_POINTS:
            continue
        home = owner(name, modules)
        allowed = allowed_imports(home, modules)
        if allowed is None:
            continue
        for target in imports(path, modules, top_level_only=False):
            part = owner(target, modules)
            if target == "tfnhr" or part == home or part.startswith(home + "."):
                continue
            whole_projects = {project for project in ("tfnhr", "capsnet") if project in allowed}
            if part in allowed or (part.split(".")[0] in whole_projects and not is_wiring(part)):
                continue
            offenders.append(f"{name} imports {target} ({home} may import: {sorted(allowed) or 'nothing'})")
    assert not offenders, "\n".join(offenders)


TF_FREE = ["tfnhr.config.choices", "tfnhr.config.ranges", "tfnhr.runtime.console", "tfnhr.runtime.stack", "tfnhr.cli", "tfnhr.evaluation.metrics", "tfnhr.charset", "tfnhr.runtime.progress", "tfnhr.runtime.horovod_build",
           "tfnhr.data.samples", "tfnhr.data.batches", "tfnhr.data.formats.iam", "tfnhr.data.formats.hdf5", "tfnhr.data.synthetic.handwriting",
           "tfnhr.serving.batcher", "tfnhr.serving.payload"]


@pytest.mark.subprocess
def test_reading_data_and_the_command_line_help_start_no_tensorflow():
    code = ("import sys\n" + "".join(f"import {name}\n" for name in TF_FREE)
            + "from tfnhr.cli import build_parser\nbuild_parser()\n"
            + "print(sorted(m for m in ('tensorflow', 'keras', 'horovod') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert result.stdout.strip() == "[]", result.stdout
