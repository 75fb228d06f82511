"""PEM blocks as Go's ``encoding/pem`` ``Decode`` finds them, for the certificate chains and
trust bundles the registry validates (``registry/trustbundles.py``, ``registry/podcertificates.py``).

A block is a ``-----BEGIN T-----`` line, optional ``Key: value`` headers up to a blank line,
base64, then the first ``-----END ...-----`` line after it, which must be T's (each line's
trailing blanks aside); a BEGIN whose next END is another's, or whose body is no base64, is
passed over and the search goes on from the line after it:

    >>> blocks("junk\\n-----BEGIN A-----\\nQUJD\\n-----END A-----\\n-----BEGIN B-----\\n-----END C-----\\n")
    [Block(kind='A', headers=False, der=b'ABC')]

One pass over the lines, each BEGIN's next END found by bisection: pairing each BEGIN with a
later END by a regular expression took seconds of the event loop over 100 KiB of BEGIN lines
without an END (Go's decoder had that quadratic case fixed as well). A body is decoded only
when none of its lines holds a character base64 refuses (the next such line is looked up, not
searched for): BEGIN lines closed by one END far below each joined and decoded the lines
down to it, 40 s over 280 KiB.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from typing import NamedTuple

__all__ = ["Block", "blocks"]

_BEGIN, _END, _DASHES = "-----BEGIN ", "-----END ", "-----"
_BASE64_LINE = re.compile(r"[A-Za-z0-9+/=]*")  # a body line base64 may take, once stripped


class Block(NamedTuple):
    kind: str  # the T of its BEGIN and END lines
    headers: bool  # whether it had "Key: value" headers
    der: bytes  # its body, decoded


def blocks(text: str) -> list[Block]:
    """Every PEM block of ``text``, in order."""
    lines = [line.rstrip(" \t\r") for line in text.split("\n")]
    ends = [i for i, line in enumerate(lines)
            if len(line) >= len(_END) + len(_DASHES) and line.startswith(_END) and line.endswith(_DASHES)]
    # from each line on, the first that is blank, and the first that base64 refuses (n: none)
    n = len(lines)
    next_blank, next_refused = [n] * (n + 1), [n] * (n + 1)
    for k in range(n - 1, -1, -1):
        stripped = lines[k].strip()
        next_blank[k] = k if not stripped else next_blank[k + 1]
        next_refused[k] = next_refused[k + 1] if _BASE64_LINE.fullmatch(stripped) else k
    found: list[Block] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not (len(line) >= len(_BEGIN) + len(_DASHES) and line.startswith(_BEGIN) and line.endswith(_DASHES)):
            continue
        after = bisect.bisect_left(ends, i)
        if after == len(ends):
            break  # no END after this BEGIN, nor after any later one
        end = ends[after]
        kind = line[len(_BEGIN):-len(_DASHES)]
        if lines[end][len(_END):-len(_DASHES)] != kind:
            continue
        headers = i < end and ":" in lines[i]
        start = min(next_blank[i], end) if headers else i  # ("Key: value" lines up to a blank one)
        if next_refused[start] < end:
            continue  # no base64
        try:
            der = base64.b64decode("".join(part.strip() for part in lines[start:end]), validate=True)
        except (binascii.Error, ValueError):
            continue
        found.append(Block(kind, headers, der))
        i = end + 1
    return found
