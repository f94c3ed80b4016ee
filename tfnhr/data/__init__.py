"""Data: embedded toy digit strings and ragged batching."""
