"""Kubernetes' version priority: how the versions of a group are ordered.

GA versions (``v2``, ``v1``) come first, newest first; then betas, then alphas
(``v2beta1`` before ``v1beta2`` before ``v1beta1``); anything else last, in
alphabetical order. The first is a group's preferred version.

    >>> sorted(["v1beta1", "foo", "v1", "v2alpha1", "v2"], key=priority)
    ['v2', 'v1', 'v1beta1', 'v2alpha1', 'foo']
"""

from __future__ import annotations

import re

__all__ = ["priority"]

_KUBE_VERSION = re.compile(r"v([1-9][0-9]*)(?:(alpha|beta)([1-9][0-9]*))?\Z")
_STABILITY = {None: 0, "beta": 1, "alpha": 2}


def priority(version: str) -> tuple[int, int, int, str]:
    """A sort key: smaller sorts first (is preferred)."""
    m = _KUBE_VERSION.match(version)
    if m is None:
        return (3, 0, 0, version)
    major, stability, minor = m.groups()
    return (_STABILITY[stability], -int(major), -int(minor or 0), "")
