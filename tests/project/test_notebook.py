"""``examples/recognizer_quickstart.ipynb`` runs end to end on a tiny configuration.

The parameters cell (tagged ``parameters``) is overridden the way papermill does it: a cell
tagged ``injected-parameters`` with tiny values is inserted right after it. The kernel runs on
this interpreter (the venv's), so it imports this checkout's ``tfnhr``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient

from tests.helpers.environment import REPO

NOTEBOOK = REPO / "examples" / "recognizer_quickstart.ipynb"
TINY = {"TRAIN": 16, "VAL": 4, "EPOCHS": 1, "HEIGHT": 24, "SHOW": 2}
PYTHON_ALIASES = {"python", f"python{sys.version_info[0]}", "python%i.%i" % sys.version_info[:2]}
"""``argv[0]`` values that jupyter_client replaces by ``sys.executable`` when starting a kernel."""


def _cell(nb, cell_id: str):
    matches = [cell for cell in nb.cells if cell.get("id") == cell_id]
    assert len(matches) == 1, f"expected one cell with id {cell_id!r}, found {len(matches)}"
    return matches[0]


def _text(cell) -> str:
    """The cell's stdout (stream) and plain-text results, joined."""
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream" and output.name == "stdout":
            parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def _images(cell) -> int:
    return sum(1 for output in cell.get("outputs", []) if "image/png" in output.get("data", {}))


def _kernel_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``python3`` if that kernelspec starts this interpreter, else a kernelspec written for it
    under a temporary ``JUPYTER_PATH`` entry."""
    try:
        argv = KernelSpecManager().get_kernel_spec("python3").argv
    except NoSuchKernel:
        argv = None
    if argv and (argv[0] in PYTHON_ALIASES or Path(argv[0]).resolve() == Path(sys.executable).resolve()):
        return "python3"
    name = "tfnhr-test-python"
    spec_dir = tmp_path / "jupyter" / "kernels" / name
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "tfnhr test python", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return name


def test_committed_notebook_has_no_outputs_and_python3_kernel():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert all(not cell.outputs and cell.execution_count is None for cell in code)
    assert [cell.id for cell in code if "parameters" in cell.metadata.get("tags", [])] == ["parameters"]


@pytest.mark.subprocess
@pytest.mark.slow
def test_quickstart_runs_on_a_tiny_configuration(tmp_path, monkeypatch):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    parameters = _cell(nb, "parameters")
    for name in TINY:
        assert f"{name} = " in parameters.source, f"the parameters cell no longer sets {name}"
    injected = nbformat.v4.new_code_cell("\n".join(f"{name} = {value!r}" for name, value in TINY.items()),
                                         id="injected-parameters")
    injected.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(nb.cells.index(parameters) + 1, injected)

    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    client = NotebookClient(nb, timeout=300, kernel_name=_kernel_name(tmp_path, monkeypatch),
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError (with the traceback) if a cell fails

    errors = [output for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs
              if output.output_type == "error"]
    assert not errors

    data = _text(_cell(nb, "data"))
    assert f"{TINY['TRAIN']} training lines, {TINY['VAL']} validation lines, {TINY['HEIGHT']} px high" in data
    assert _images(_cell(nb, "data")) == 1

    history_rows = [line.split() for line in _text(_cell(nb, "train")).splitlines()]
    epochs = [row for row in history_rows if row and row[0].isdigit() and len(row) == 5]
    assert [int(row[0]) for row in epochs] == list(range(1, TINY["EPOCHS"] + 1))
    assert all(row[2].endswith("%") and row[3].endswith("%") for row in epochs)

    decode = _text(_cell(nb, "decode"))
    assert "greedy" in decode and "beam + LM" in decode and "CER" in decode
    assert decode.count("reference:") == TINY["SHOW"] and decode.count("confidence:") == TINY["SHOW"]
    assert _images(_cell(nb, "decode")) == 1

    assert "identical scores and predictions" in _text(_cell(nb, "save"))
