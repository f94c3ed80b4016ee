"""horovod_jobs: what runs under ``horovodrun`` (distributed training for Keras 3 models).

May import: tfnhr, capsnet (any part but their command-line modules).
"""
