"""The recognition service behind ``tfnhr serve`` (RETURNN's "daemon mode"): HTTP in front,
one model behind, concurrent requests batched into single model calls.

* :mod:`tfnhr.service.batcher` — the queue and the worker thread that owns the model
  (independent of HTTP and of the model: it batches items for any ``list -> list`` callable).
* :mod:`tfnhr.service.payload` — request bodies to named images (raw or multipart), size limits.
* :mod:`tfnhr.service.http` — the threaded HTTP server: routes, JSON answers, access log,
  graceful shutdown.
"""
