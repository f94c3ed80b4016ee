"""``tfnhr.runtime.progress.Progress``: a redrawn line on a terminal, a few plain lines in a log file."""

from __future__ import annotations

import io

from tfnhr.runtime.progress import LOG_INTERVAL, Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_file_gets_the_last_line_and_at_most_one_per_tenth_and_interval():
    log = io.StringIO()
    quick = Progress(1000, "reading val data", stream=log, clock=lambda: 0.0)
    for _ in range(1000):
        quick.step()
    [line] = log.getvalue().splitlines()
    assert line.startswith("reading val data: 1000/1000 images (100%), ")

    log, now = io.StringIO(), [0.0]
    slow = Progress(1000, "reading train data", stream=log, clock=lambda: now[0])
    for _ in range(1000):
        now[0] += LOG_INTERVAL / 40  # a tenth of the work takes 2.5 intervals: a line per tenth
        slow.step()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert len(lines) == 10
    assert lines[0].startswith("reading train data: 100/1000 images (10%)")
    assert lines[-1].startswith("reading train data: 1000/1000 images (100%)")

    log, now = io.StringIO(), [0.0]
    fast = Progress(1000, "x", stream=log, clock=lambda: now[0])
    for _ in range(1000):
        now[0] += LOG_INTERVAL / 400  # the whole work takes 2.5 intervals: at most one line per interval
        fast.step()
    assert len(log.getvalue().splitlines()) == 3


def test_terminal_line_is_redrawn_and_ends_with_a_newline():
    terminal = Terminal()
    progress = Progress(3, "synth", unit="examples", stream=terminal)
    progress.update(3)
    assert terminal.getvalue().startswith("\rsynth 3/3 [") and terminal.getvalue().endswith("\n")


def test_disabled_or_empty_progress_prints_nothing():
    log = io.StringIO()
    Progress(5, "x", enabled=False, stream=log).update(5)
    Progress(0, "x", stream=log).update(0)
    assert log.getvalue() == ""
