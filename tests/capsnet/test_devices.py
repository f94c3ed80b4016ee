"""capsnet.devices: canonical device names, resolving against this host, logical CPUs.

The test process has ``LOGICAL_CPUS`` logical CPU devices (configured in conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from capsnet.devices import (
    available_devices,
    canonical_device,
    configure_logical_cpus,
    parse_devices,
    prepare_devices,
    resolve_devices,
)
from tests.helpers.environment import LOGICAL_CPUS, REPO

CPUS = [f"/device:CPU:{i}" for i in range(LOGICAL_CPUS)]


@pytest.mark.parametrize("name, expected", [
    ("cpu:0", "/device:CPU:0"),
    ("CPU:0", "/device:CPU:0"),
    ("/cpu:0", "/device:CPU:0"),
    (" gpu:1 ", "/device:GPU:1"),
    ("/device:CPU:0", "/device:CPU:0"),
    ("device:gpu:12", "/device:GPU:12"),
    ("/job:localhost/replica:0/task:0/device:CPU:3", "/device:CPU:3"),
    ("/job:worker/device:GPU:2", "/device:GPU:2"),
    ("xla_cpu:007", "/device:XLA_CPU:7"),
])
def test_canonical_device(name, expected):
    assert canonical_device(name) == expected


@pytest.mark.parametrize("name", ["cpu", "cpu:", "cpu:x", "", "/device:CPU:0:1", "cpu:-1", "gpu 0", ":0",
                                  "/device/CPU:0", "0:cpu"])
def test_canonical_device_rejects_bad_syntax(name):
    with pytest.raises(ValueError) as err:
        canonical_device(name)
    assert repr(name) in str(err.value) and "/device:CPU:0" in str(err.value)


def test_available_devices_are_the_logical_cpus():
    assert [d for d in available_devices() if d.startswith("/device:CPU:")] == CPUS


def test_resolve_devices():
    assert resolve_devices("cpu:0, CPU:3,/device:CPU:1") == [CPUS[0], CPUS[3], CPUS[1]]
    assert resolve_devices(["cpu:2"]) == [CPUS[2]]
    assert resolve_devices(",".join(CPUS)) == CPUS


@pytest.mark.parametrize("names, message", [
    ("", "no devices"),
    ([], "no devices"),
    (" , ", "no devices"),
    ("cpu:1,/device:CPU:1", "more than once: /device:CPU:1"),
    ("cpu:0;cpu:1", "not a device name"),
])
def test_resolve_devices_rejects(names, message):
    with pytest.raises(ValueError, match=message):
        resolve_devices(names)


@pytest.mark.parametrize("unknown", ["gpu:0", f"cpu:{LOGICAL_CPUS}"])
def test_resolve_devices_names_missing_devices(unknown):
    with pytest.raises(ValueError) as err:
        resolve_devices(f"cpu:0,{unknown}")
    text = str(err.value)
    assert f"not available: {canonical_device(unknown)};" in text
    assert ", ".join(CPUS) in text  # the available ones
    assert "configure_logical_cpus" in text and "--devices cpu:0,cpu:1" in text


def test_parse_devices_does_not_require_existence():
    assert parse_devices("gpu:0,gpu:7") == ["/device:GPU:0", "/device:GPU:7"]


def test_configure_logical_cpus_after_initialisation():
    available_devices()  # make sure the runtime is up
    assert configure_logical_cpus(2) == CPUS
    with pytest.raises(RuntimeError, match=f"already initialised with {LOGICAL_CPUS}.*before any TensorFlow op"):
        configure_logical_cpus(2 * LOGICAL_CPUS)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="positive int"):
            configure_logical_cpus(bad)


def test_prepare_devices_in_this_process():
    available_devices()  # the runtime is up: it cannot grow more logical CPUs
    assert prepare_devices("cpu:1") == [CPUS[1]]
    with pytest.raises(ValueError, match=f"cannot configure {LOGICAL_CPUS + 2} logical CPUs"):
        prepare_devices(f"cpu:0,cpu:{LOGICAL_CPUS + 1}")


def _run_fresh(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.mark.subprocess
@pytest.mark.slow
def test_prepare_devices_configures_logical_cpus_in_a_fresh_process():
    result = _run_fresh(
        "import json, tensorflow as tf\n"
        "from capsnet.devices import prepare_devices\n"
        "chosen = prepare_devices('cpu:0,cpu:2')\n"
        "print(json.dumps([chosen, [d.name for d in tf.config.list_logical_devices('CPU')]]))\n"
        "try:\n"
        "    prepare_devices('cpu:3')\n"
        "except ValueError as err:\n"
        "    print(json.dumps(str(err)))\n"
    )
    assert result.returncode == 0, result.stderr
    chosen_line, error_line = result.stdout.strip().splitlines()[-2:]
    chosen, logical = json.loads(chosen_line)
    assert chosen == ["/device:CPU:0", "/device:CPU:2"]
    assert logical == ["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]
    assert "already initialised with 3" in json.loads(error_line)
