"""A trained recognizer for programs: the SavedModel export that runs without tfnhr
(:mod:`tfnhr.serving.export`, ``tfnhr export``) and the recognition service behind
``tfnhr serve`` (RETURNN's "daemon mode"): HTTP in front, one model behind, concurrent requests
batched into single model calls.

* :mod:`tfnhr.serving.export` — the SavedModel with in-graph image decoding, packing and greedy
  decoding.
* :mod:`tfnhr.serving.graph_images` — image files to gray levels in graph ops, as the Python reader
  gives them.

* :mod:`tfnhr.serving.batcher` — the queue and the worker thread that owns the model
  (independent of HTTP and of the model: it batches items for any ``list -> list`` callable).
* :mod:`tfnhr.serving.payload` — request bodies to named images (raw or multipart), size limits.
* :mod:`tfnhr.serving.http` — the threaded HTTP server: routes, JSON answers, access log,
  graceful shutdown.
* :mod:`tfnhr.serving.pages` — ``POST /recognize/page``: a page image and its layout file in,
  the filled layout file out.

May import: tfnhr.charset, tfnhr.config, tfnhr.data, tfnhr.data.pages, tfnhr.models, tfnhr.recognition.
"""
