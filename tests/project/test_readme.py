"""The README's commands and Python blocks, run as written, in order, in one fresh folder, each
with flags appended that only make it small (fewer lines, a tiny network, one epoch; argparse
keeps the last value of a flag): never the geometry (height, blocks) or anything else a reader
would copy. ``make`` lines run in CI themselves; ``docker`` lines need an image build
(``make image-check``)."""

from __future__ import annotations

import http.client
import re
import shlex
import socket
import subprocess
import sys
import time

import pytest
from PIL import Image

from tests.helpers.environment import REPO, VENV_BIN

TINY_NETWORK = ["--units", "2,6,16", "--filters", "4,8"]
TINY_TRAINING = ["--max-train", "8", "--max-val", "3", "--epochs", "1"]
TINY_MLCN = ["--dataset", "synthetic", "--limit-train", "128", "--limit-test", "64", "--epochs", "1",
             "--lanes", "2", "--width", "1", "--depth", "1", "--threads", "1"]


def readme_blocks(language: str) -> list[str]:
    """The README's fenced blocks in ``language``, in order."""
    text = (REPO / "README.md").read_text()
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def block_commands(block: str) -> list[list[str]]:
    """A shell block's commands as argument lists (continuation lines joined, comments dropped)."""
    return [shlex.split(line, comments=True) for line in block.replace("\\\n", " ").splitlines()
            if shlex.split(line, comments=True)]


def smaller(argv: list[str]) -> list[str]:
    """The flags that make a README command tiny (appended to it)."""
    program, rest = argv[0], argv[1:]
    if program == "tfnhr" and rest[0] == "synth":
        return ["--train", "4", "--val", "1", "--test", "1"] if "--layout" in rest else \
            ["--train", "12", "--val", "4", "--test", "4", "--max-chars", "16"]
    if program == "tfnhr" and rest[0] == "train":
        return TINY_TRAINING + ([] if "--config" in rest else TINY_NETWORK)
    if program == "capsnet" and rest[0] == "train":
        return TINY_MLCN
    if "train.py" in argv:
        return TINY_MLCN if "mlcn" in argv else TINY_TRAINING + TINY_NETWORK
    return []


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve_once(args: list[str]) -> None:
    """``tfnhr serve ARGS`` in its own process on a free loopback port: up, healthy, stopped."""
    port = free_port()
    server = subprocess.Popen([str(VENV_BIN / "tfnhr"), *args, "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(120):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)  # no proxy, whatever the environment
            try:
                connection.request("GET", "/health")
                assert connection.getresponse().status == 200
                return
            except OSError:
                assert server.poll() is None, server.stdout.read()
                time.sleep(0.5)
            finally:
                connection.close()
        raise AssertionError("tfnhr serve did not answer /health within 60 s")
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_command(argv: list[str]) -> int:
    """One README command: ``tfnhr`` in this process, ``capsnet`` in its own (it sizes TensorFlow's
    thread pools, which a process can do once), a Horovod line as its single-process run (the same
    ``train.py`` options and code, one worker)."""
    from tfnhr.cli import main as tfnhr_main

    args = argv[1:] + smaller(argv)
    if argv[0] == "tfnhr" and argv[1] == "serve":
        serve_once(args)
        return 0
    if argv[0] == "tfnhr":
        return tfnhr_main(args)
    if argv[0] == "capsnet":
        command = [str(VENV_BIN / "capsnet"), *args]
    elif argv[0].endswith("horovodrun"):
        command = [sys.executable, str(REPO / "train.py"), *argv[argv.index("train.py") + 1:], *smaller(argv)]
    else:
        raise AssertionError(f"a README command this test does not know how to run: {shlex.join(argv)}")
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, shlex.join(argv) + "\n" + result.stdout[-2000:] + result.stderr[-3000:]
    return 0


def inputs_for(folder) -> None:
    """What the README's commands read besides what earlier commands write: a text corpus and two
    line images (the first test line of the synthetic set, as PNG and as JPEG)."""
    (folder / "corpus.txt").write_text("the quick brown fox jumps over the lazy dog\n" * 20)
    line = sorted((folder / "data" / "synth" / "lines").rglob("*.png"))[0]
    Image.open(line).save(folder / "line1.png")
    Image.open(line).convert("RGB").save(folder / "line2.jpg", quality=95)


@pytest.mark.slow
@pytest.mark.subprocess
def test_every_readme_command_and_python_block_runs_as_written(tmp_path, monkeypatch):
    import capsnet.training
    import tfnhr.training

    monkeypatch.chdir(tmp_path)
    ran = []
    for block in readme_blocks("bash"):
        for argv in block_commands(block):
            if argv[0] in ("make", "docker"):
                continue
            assert run_command(argv) == 0, shlex.join(argv)
            ran.append(argv[:2])
            if argv[:2] == ["tfnhr", "synth"] and not (tmp_path / "corpus.txt").exists():
                inputs_for(tmp_path)
    assert ["tfnhr", "train"] in ran and ["capsnet", "train"] in ran and len(ran) >= 20

    tiny = {tfnhr.training: ("TrainOptions", {"mdlstm_units": (2, 6, 16), "conv_filters": (4, 8), "max_train": 8,
                                              "max_val": 3, "epochs": 1, "time_limit": None}),
            capsnet.training: ("TrainConfig", {"limit_train": 128, "limit_test": 64, "lanes": 2, "width": 1,
                                               "depth": 1})}
    for module, (name, overrides) in tiny.items():
        original = getattr(module, name)
        monkeypatch.setattr(module, name, lambda original=original, overrides=overrides, **fields:
                            original(**{**fields, **overrides}))
    blocks = readme_blocks("python")
    assert len(blocks) == 2
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})  # noqa: S102 - the README's own code
