"""``horovodrun -np N python train.py --task nhr|mlcn ...`` from the repository root: see
``horovod_jobs/train.py`` and ``horovod_jobs/README.md``."""

from horovod_jobs.train import main

raise SystemExit(main())
