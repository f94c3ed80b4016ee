"""``caught``: a call and the user warnings it raised, every one of them (even repeats), so that a
test can count the warnings a function gives."""

from __future__ import annotations

import warnings


def caught(function, *args, **kwargs):
    """``function(*args, **kwargs)`` and the UserWarnings it raised (all of them, even repeats)."""
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    return result, [str(w.message) for w in records if issubclass(w.category, UserWarning)]
