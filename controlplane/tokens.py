"""Static bearer tokens in kube-apiserver's ``--token-auth-file`` format.

One user per line, at least three columns; the fourth, quoted when it holds
more than one, lists the user's groups::

    31ada4fd-adec-460c-809a-9e56ceb75269,admin,admin,"system:masters,ops"
    8d2f...,alice,1001

``serve`` writes such a file with one admin (group ``system:masters``) when it
is given none; authentication reads it back with ``read_token_file``.
"""

from __future__ import annotations

import csv
import fcntl
import io
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .files import write_private

__all__ = [
    "MASTERS_GROUP",
    "TokenEntry",
    "TokenFileError",
    "ensure_generated_admin",
    "find_admin",
    "format_token_csv",
    "new_admin",
    "parse_token_csv",
    "read_token_file",
    "write_token_file",
]

MASTERS_GROUP = "system:masters"


class TokenFileError(ValueError):
    """The token file is malformed (as kube-apiserver would refuse it at startup)."""


@dataclass(frozen=True, slots=True)
class TokenEntry:
    token: str
    user: str
    uid: str
    groups: tuple[str, ...] = ()


def parse_token_csv(text: str, source: str = "<token file>",
                    warn: Callable[[str], None] | None = None) -> list[TokenEntry]:
    """Parse the CSV text of a token file, with kube-apiserver's rules (its
    ``tokenfile.NewCSV``): blank lines are skipped, fewer than three columns is
    an error, a record with an empty token is skipped and a duplicate token
    takes the later record's user, each with a warning passed to ``warn``.

    >>> parse_token_csv('t0k3n,admin,42,"system:masters,ops"\\n')
    [TokenEntry(token='t0k3n', user='admin', uid='42', groups=('system:masters', 'ops'))]
    >>> parse_token_csv('t,a,1\\n,b,2\\nt,c,3\\n', source='tokens.csv', warn=print)
    empty token has been found in token file 'tokens.csv', record number '2'
    duplicate token has been found in token file 'tokens.csv', record number '3'
    [TokenEntry(token='t', user='c', uid='3', groups=())]
    """
    entries: dict[str, TokenEntry] = {}
    record_number = 0
    for record in csv.reader(io.StringIO(text), skipinitialspace=True):
        if not record or (len(record) == 1 and not record[0].strip()):
            continue
        if len(record) < 3:
            raise TokenFileError(f"token file '{source}' must have at least 3 columns "
                                 f"(token, user name, user uid), found {len(record)}")
        record_number += 1
        token, user, uid = (c.strip() for c in record[:3])
        if not token:
            if warn is not None:
                warn(f"empty token has been found in token file '{source}', record number '{record_number}'")
            continue
        if token in entries and warn is not None:
            warn(f"duplicate token has been found in token file '{source}', record number '{record_number}'")
        groups = tuple(g.strip() for g in record[3].split(",") if g.strip()) if len(record) > 3 else ()
        entries[token] = TokenEntry(token, user, uid, groups)
    return list(entries.values())


def read_token_file(path: Path, warn: Callable[[str], None] | None = None) -> list[TokenEntry]:
    return parse_token_csv(path.read_text(encoding="utf-8"), source=str(path), warn=warn)


def format_token_csv(entries: list[TokenEntry]) -> str:
    """The file's text; the groups column is always quoted, as kube's docs write it.

    >>> format_token_csv([TokenEntry("t0k3n", "admin", "admin", ("system:masters",))])
    't0k3n,admin,admin,"system:masters"\\n'
    """
    lines = []
    for e in entries:
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow([e.token, e.user, e.uid])
        line = out.getvalue()
        if e.groups:
            line += ',"' + ",".join(e.groups).replace('"', '""') + '"'
        lines.append(line + "\n")
    return "".join(lines)


def write_token_file(path: Path, entries: list[TokenEntry]) -> None:
    """Write ``entries`` to ``path`` (mode 0600, atomically)."""
    write_private(path, format_token_csv(entries).encode())


def new_admin(user: str = "admin") -> TokenEntry:
    """A fresh member of ``system:masters`` with a random 256-bit token."""
    return TokenEntry(token=secrets.token_urlsafe(32), user=user, uid=user, groups=(MASTERS_GROUP,))


def ensure_generated_admin(path: Path, warn: Callable[[str], None] | None = None) -> TokenEntry:
    """The admin of the generated token file ``path``, added to it if it has none.

    Servers sharing a state directory (``--workers``, replicas over one etcd sharing a
    volume) may start together: the read and the write are done under an exclusive lock
    on ``path``'s ``.lock`` sibling, so they agree on one admin, as on one CA."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = read_token_file(path, warn) if path.exists() else []
        admin = find_admin(entries)
        if admin is None:
            admin = new_admin()
            write_token_file(path, [*entries, admin])
        return admin


def find_admin(entries: list[TokenEntry]) -> TokenEntry | None:
    """The first entry in ``system:masters``, if any."""
    return next((e for e in entries if MASTERS_GROUP in e.groups), None)
