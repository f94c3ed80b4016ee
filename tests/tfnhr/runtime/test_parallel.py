"""Work spread over worker processes (:mod:`tfnhr.runtime.parallel`): results in order, computed in other
processes, with few chunks waiting at a time."""

from __future__ import annotations

import functools
import os

import pytest

from tfnhr.runtime.parallel import ordered_map


def pid_and_power(exponent: int, number: int) -> tuple[int, int]:
    return os.getpid(), number ** exponent


@pytest.mark.parametrize("processes, chunk", [(1, 32), (2, 3), (3, 1), (2, 100)])
def test_ordered_map_gives_each_result_in_order(processes, chunk):
    cube = functools.partial(pid_and_power, 3)
    results = list(ordered_map(cube, (n for n in range(50)), processes, chunk=chunk))  # items from a generator
    assert [value for _, value in results] == [n ** 3 for n in range(50)]
    pids = {pid for pid, _ in results}
    if processes == 1:
        assert pids == {os.getpid()}
    else:  # how the chunks fall on the workers is up to their start-up times
        assert os.getpid() not in pids and 1 <= len(pids) <= processes


def test_ordered_map_reads_items_only_a_few_chunks_ahead():
    read = []

    def items():
        for n in range(100):
            read.append(n)
            yield n

    results = ordered_map(functools.partial(pid_and_power, 1), items(), 2, chunk=5)
    assert next(results)[1] == 0
    assert len(read) <= 2 * 2 * 5 + 5  # 2 tasks per process submitted, the next one being filled
    assert [value for _, value in results] == list(range(1, 100))


def test_ordered_map_refuses_no_processes():
    with pytest.raises(ValueError, match="processes must be >= 1"):
        ordered_map(abs, [1], 0)  # at the call, before the caller writes anything
