"""The floor plan, checked from the source: no import circles, library code never imports
command-line modules, single-process code never imports ``horovod_jobs`` or Horovod, and the
modules that must load without TensorFlow do."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.environment import REPO

PACKAGES = ("tfnhr", "capsnet", "horovod_jobs")
ENTRY_POINTS = {"tfnhr.cli", "capsnet.cli", "capsnet.__main__", "tfnhr.main_job", "horovod_jobs.train",
                "horovod_jobs.demo", "horovod_jobs.smoke"}
"""Modules run as programs: like ``commands/`` modules they only wire the library together."""


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in (REPO / package).rglob("*.py")}


def imports(path: Path, modules: dict[str, Path], top_level_only: bool) -> set[str]:
    """Project modules that ``path`` imports (at module level only, if asked; ``TYPE_CHECKING``
    blocks do not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
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


TF_FREE = ["tfnhr.choices", "tfnhr.ranges", "tfnhr.console", "tfnhr.stack", "tfnhr.cli", "tfnhr.metrics", "tfnhr.charset", "tfnhr.progress", "tfnhr.horovod_build",
           "tfnhr.data.samples", "tfnhr.data.batches", "tfnhr.data.iam", "tfnhr.data.hdf5", "tfnhr.data.synthetic",
           "tfnhr.service.batcher", "tfnhr.service.payload"]


@pytest.mark.subprocess
def test_reading_data_and_the_command_line_help_start_no_tensorflow():
    code = ("import sys\n" + "".join(f"import {name}\n" for name in TF_FREE)
            + "from tfnhr.cli import build_parser\nbuild_parser()\n"
            + "print(sorted(m for m in ('tensorflow', 'keras', 'horovod') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert result.stdout.strip() == "[]", result.stdout
