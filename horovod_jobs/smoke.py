"""Collective-ops smoke job: run under ``horovodrun -np N`` to check that Horovod works.

Each rank contributes the vector ``(rank + 1) * [1, 2, 3]`` and checks the results of the core
``horovod.tensorflow`` collectives against their closed forms:

* allreduce Sum:      ``N (N + 1) / 2 * [1, 2, 3]``
* allreduce Average:  ``(N + 1) / 2 * [1, 2, 3]``
* grouped_allreduce:  both of the above in one call (the op our Keras 3 train steps use)
* allgather:          ``[0, 1, ..., N - 1]``
* broadcast from 0:   rank 0's value ``0.0``

Prints one JSON line per rank and exits non-zero on that rank if any result is off.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def run_checks() -> dict[str, bool]:
    """Run the collectives on this rank; returns check name -> passed."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    base = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    contribution = tf.constant((rank + 1) * base)

    summed = hvd.allreduce(contribution, op=hvd.Sum).numpy()
    averaged = hvd.allreduce(contribution, op=hvd.Average).numpy()
    grouped = [t.numpy() for t in hvd.grouped_allreduce([contribution, 2.0 * contribution], op=hvd.Sum)]
    gathered = hvd.allgather(tf.constant([rank], dtype=tf.int32)).numpy()
    broadcast = hvd.broadcast(tf.constant(float(rank * 10)), root_rank=0).numpy()

    total = size * (size + 1) / 2
    return {
        "allreduce_sum": np.allclose(summed, total * base),
        "allreduce_average": np.allclose(averaged, (size + 1) / 2 * base),
        "grouped_allreduce": np.allclose(grouped[0], total * base) and np.allclose(grouped[1], 2 * total * base),
        "allgather": gathered.tolist() == list(range(size)),
        "broadcast": float(broadcast) == 0.0,
    }


def main() -> int:
    import horovod.tensorflow as hvd

    checks = run_checks()
    print(json.dumps({"rank": hvd.rank(), "size": hvd.size(), "ok": all(checks.values()), "checks": checks}),
          flush=True)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
