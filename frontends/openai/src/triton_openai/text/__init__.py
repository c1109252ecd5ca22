"""Checks and escapes of client-supplied text: `printable.py` makes it safe for a log
line, `surrogates.py` finds what is not text in a request's JSON.  Leaves: they import
nothing of the frontend."""
