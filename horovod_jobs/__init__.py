"""horovod_jobs: what runs under ``horovodrun`` (distributed training for Keras 3 models)."""
