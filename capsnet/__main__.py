"""``python -m capsnet``: the ``capsnet`` command line (:mod:`capsnet.cli`)."""

import sys

from capsnet.cli import main

sys.exit(main())
