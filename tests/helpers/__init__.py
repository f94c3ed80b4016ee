"""What several test modules share: paths and devices (:mod:`~tests.helpers.environment`),
independent references (NumPy loops), tiny models and data trees, and the layer contract
(:mod:`~tests.helpers.layer_contract`)."""
