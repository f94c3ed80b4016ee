"""tfnhr.training.workers: the launcher's own traceback left out of what ``tfnhr train
--workers N`` prints, every worker line kept."""

from __future__ import annotations

import io

from tfnhr.training.workers import forward_without_launcher_traceback


def test_the_launchers_traceback_is_dropped_and_everything_else_kept():
    lines = [b"[0]<stderr>:reading train data: 8/8 images\n",
             b"[1]<stderr>:Traceback (most recent call last):\n",  # a worker's traceback: kept
             b"[1]<stderr>:ValueError: bad\n",
             b"[0]<stderr>:train.py --task nhr: error on rank 0: a peer rank died\n",
             b"Traceback (most recent call last):\n",
             b'  File "/venv/bin/horovodrun", line 6, in <module>\n',
             b"    sys.exit(run_commandline())\n",
             b"RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus ...\n",
             b"Process name: 1\n",
             b"Exit code: 137\n"]
    out = io.BytesIO()
    forward_without_launcher_traceback(io.BytesIO(b"".join(lines)), out)
    assert out.getvalue() == b"".join(lines[:4] + lines[-2:])


def test_another_traceback_of_the_launcher_is_kept_whole():
    text = b"Traceback (most recent call last):\n  File x\nValueError: -np must be positive\n"
    out = io.BytesIO()
    forward_without_launcher_traceback(io.BytesIO(b"[0]<stdout>:hello\n" + text), out)
    assert out.getvalue() == b"[0]<stdout>:hello\n" + text
