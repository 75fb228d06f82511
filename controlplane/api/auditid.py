"""Audit IDs: the ``Audit-Id`` every response carries, as upstream's ``WithAuditInit`` filter
(``k8s.io/apiserver/pkg/endpoints/filters/audit_init.go``) gives every request, audited or
not: the request's own ``Audit-ID`` header, else a new one."""

from __future__ import annotations

import itertools
import os

# An audit ID is a version 4 UUID's text, as upstream's ``uuid.New()``: 16 random bytes a
# process, the last 48 bits of which count the requests (unique in the process, and across
# processes by the other 74 random bits, drawn again in a forked child); a third of
# ``uuid.uuid4()``'s cost.
_id_prefix = ""
_id_count = itertools.count()


def _draw_id_prefix() -> None:
    global _id_prefix, _id_count
    h = os.urandom(10).hex()
    _id_prefix = f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-"
    _id_count = itertools.count(int.from_bytes(os.urandom(6), "big"))


_draw_id_prefix()
os.register_at_fork(after_in_child=_draw_id_prefix)


def new_audit_id() -> str:
    """A new audit ID: the text of a version 4 UUID, unique in this process's life."""
    return f"{_id_prefix}{next(_id_count) & 0xFFFF_FFFF_FFFF:012x}"
