"""Device names for lane placement: canonical spelling, what exists, logical CPUs on a CPU-only host.

A canonical device name is ``/device:TYPE:INDEX`` with TYPE upper-case (``/device:CPU:0``,
``/device:GPU:1``), the form ``tf.config.list_logical_devices()`` reports. Nothing here falls back
to another device silently: a device that does not exist is an error.

On a host without accelerators, several *logical* CPU devices (``/device:CPU:0`` ...) come from
splitting the physical CPU with ``tf.config.set_logical_device_configuration``; that has to happen
before TensorFlow initialises its runtime (before its first op), which is what
:func:`configure_logical_cpus` and :func:`prepare_devices` do.
"""

from __future__ import annotations

import re
from typing import Sequence

import tensorflow as tf

_DEVICE = re.compile(
    r"(?:/job:[^/]+)?(?:/replica:\d+)?(?:/task:\d+)?"  # optional task prefix
    r"(?:/device:|/|device:)?(?P<type>[A-Za-z][A-Za-z0-9_]*):(?P<index>\d+)"
)
_ACCEPTED_FORMS = "cpu:0, CPU:0, /cpu:0, gpu:1, /device:CPU:0, /job:localhost/replica:0/task:0/device:CPU:0"


def canonical_device(name: str) -> str:
    """``"cpu:0"``, ``"/gpu:1"``, ``"/job:localhost/replica:0/task:0/device:CPU:0"``, ... ->
    ``"/device:CPU:0"`` style (type upper-case, index without leading zeros).

    Raises ``ValueError`` naming the text and the accepted forms if it is not a device name.
    """
    match = _DEVICE.fullmatch(name.strip()) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"not a device name: {name!r}; accepted forms: {_ACCEPTED_FORMS}")
    return f"/device:{match['type'].upper()}:{int(match['index'])}"


def parse_devices(names: Sequence[str] | str) -> list[str]:
    """Canonical names of a device list (``"cpu:0,cpu:1"`` or a sequence), in the given order,
    without checking that they exist (for planning placements on hypothetical hardware).

    Raises ``ValueError`` for an empty list, a bad name or a device named twice.
    """
    if isinstance(names, str):
        names = [part for part in names.split(",") if part.strip()]
    devices = [canonical_device(name) for name in names]
    if not devices:
        raise ValueError("no devices given: expected a list like cpu:0,cpu:1")
    repeated = sorted({device for device in devices if devices.count(device) > 1})
    if repeated:
        raise ValueError(f"device(s) named more than once: {', '.join(repeated)}")
    return devices


def available_devices() -> list[str]:
    """Canonical names of TensorFlow's logical devices of every type (initialises the runtime)."""
    return [canonical_device(device.name) for device in tf.config.list_logical_devices()]


def resolve_devices(names: Sequence[str] | str) -> list[str]:
    """:func:`parse_devices`, and every device must exist (:func:`available_devices`).

    Raises ``ValueError`` naming the missing devices and the available ones.
    """
    devices = parse_devices(names)
    available = available_devices()
    missing = [device for device in devices if device not in available]
    if missing:
        raise ValueError(
            f"device(s) not available: {', '.join(missing)}; available: {', '.join(available)}. "
            "On a CPU-only host more logical CPUs come from capsnet.devices.configure_logical_cpus(n) "
            "before TensorFlow's first op, or from the CLI's --devices cpu:0,cpu:1,... (which configures them)."
        )
    return devices


def configure_logical_cpus(n: int) -> list[str]:
    """Split the first physical CPU into ``n`` logical CPU devices; returns their canonical names.

    Must run before TensorFlow initialises its runtime; it does not initialise it (so thread-pool
    settings can still follow). If the runtime is already initialised with at least ``n`` logical
    CPUs, returns all of those; with fewer, raises ``RuntimeError``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of logical CPUs must be a positive int, got {n!r}")
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    except RuntimeError as err:
        present = [canonical_device(device.name) for device in tf.config.list_logical_devices("CPU")]
        if len(present) >= n:
            return present
        raise RuntimeError(
            f"cannot configure {n} logical CPUs: TensorFlow's runtime is already initialised with "
            f"{len(present)} ({', '.join(present)}); configure_logical_cpus must be called before any "
            f"TensorFlow op ({err})"
        ) from err
    return [f"/device:CPU:{index}" for index in range(n)]


def _configured_cpu_count() -> int:
    """Logical CPUs of the first physical CPU as configured so far (does not initialise the runtime)."""
    configuration = tf.config.get_logical_device_configuration(tf.config.list_physical_devices("CPU")[0])
    return len(configuration) if configuration else 1


def prepare_devices(names: Sequence[str] | str) -> list[str]:
    """For a command line: configure enough logical CPUs for the requested ``/device:CPU:i``
    (highest index + 1) if there are fewer and the runtime is not initialised yet, then
    :func:`resolve_devices`.

    Raises ``ValueError`` for bad or missing devices, including CPUs that the already initialised
    runtime lacks.
    """
    devices = parse_devices(names)
    cpu_indices = [int(device.rsplit(":", 1)[1]) for device in devices if device.startswith("/device:CPU:")]
    needed = max(cpu_indices, default=-1) + 1
    if needed > _configured_cpu_count():
        try:
            configure_logical_cpus(needed)
        except RuntimeError as err:
            raise ValueError(f"cannot provide {', '.join(devices)}: {err}") from err
    return resolve_devices(devices)
