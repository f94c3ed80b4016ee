"""The Dockerfile, Makefile, CI script and README agree on one set-up (no Docker engine here)."""

from __future__ import annotations

import os
import re
import shlex

from tests.helpers.environment import REPO


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def test_every_copied_file_exists():
    copies = [args for keyword, args in dockerfile_instructions() if keyword in ("COPY", "ADD")]
    assert copies
    for args in copies:
        sources = [word for word in shlex.split(args) if not word.startswith("--")][:-1]
        for source in sources:
            assert (REPO / source).exists(), f"Dockerfile copies {source}, which does not exist"


def test_dockerfile_runs_the_same_setup_as_make():
    runs = " ".join(args for keyword, args in dockerfile_instructions() if keyword == "RUN")
    assert "./scripts/setup.sh" in runs
    assert "horovodrun --check-build" in runs
    makefile = (REPO / "Makefile").read_text()
    setup_recipe = re.search(r"^setup:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE).group(1)
    assert "./scripts/setup.sh" in setup_recipe


def test_dockerfile_base_sshd_and_entrypoint():
    instructions = dockerfile_instructions()
    assert instructions[0][0] == "FROM" and instructions[0][1].startswith("python:3.11")
    runs = " ".join(args for keyword, args in instructions if keyword == "RUN")
    for package in ("libopenmpi-dev", "openmpi-bin", "openssh-server", "cmake"):
        assert package in runs
    entrypoint = [args for keyword, args in instructions if keyword == "ENTRYPOINT"]
    assert len(entrypoint) == 1
    script = REPO / shlex.split(entrypoint[0].strip("[]").replace(",", " "))[0].replace("/workspace/", "")
    assert script.exists() and os.access(script, os.X_OK)


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```(?:bash|sh)?\n(.*?)```", quick_start, re.DOTALL)
    lines = [line for block in commands for line in block.splitlines() if line and not line.startswith("#")]
    assert len(lines) == 2, f"the quick start must be exactly two commands, found {lines}"
    test_command = next(line for line in lines if "test" in line)
    assert test_command in (REPO / ".ci" / "run").read_text()
