"""capsnet: CapsNet and Multi-Lane CapsNet (MLCN) with lanes placed on devices.

May import: nothing of tfnhr or horovod_jobs.
"""
