"""Client-supplied text made safe for a log line (or an error message that names it).

A path is percent-decoded before the app sees it, so `%0a` in a URL is a newline in
`scope["path"]`: written as it is, it would end the access log's line and start a forged
one.  Every character that is not printable (controls, line and paragraph separators,
invisible format characters) is written as its Python escape, and backslashes are
doubled, so that an escape in the log always means an escaped character.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^\x20-\x5b\x5d-\x7e]")  # anything but printable ASCII, and `\`


def _escape(match: re.Match) -> str:
    c = match.group()
    if c == "\\":
        return "\\\\"
    return c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode()


def printable(value: str) -> str:
    """`value` with every unprintable character escaped: one line, as it was sent."""
    if value.isascii() and value.isprintable() and "\\" not in value:
        return value  # the common case: nothing to look at
    return _UNSAFE.sub(_escape, value)
