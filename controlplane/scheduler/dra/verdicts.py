"""The DynamicResources Filter's verdicts as columns over the scheduler's node rows.

With a thousand nodes of GPUs, the walk asks the DRA Filter about most of them for
every pod, and the answer is almost always the one it gave the pod before (a
node's devices change only when a claim on it is allocated or released). The
per-node answer cache (``DraManager._plan``) made each answer a dict lookup, but a
Python loop over the nodes still cost more than the rest of the cycle. Here the
verdicts of one claim signature are an ``int8`` array indexed by node row
(``NodeColumns``' rows): ``1`` fits, ``0`` does not, ``-1`` unknown. A cycle reads
the walk's rows from it in one array operation and computes only the unknown ones.

Invariant: a verdict other than ``-1`` was computed at the current ``epoch``
(the inventory's version, the shared pools' generation, and the rows' layout:
which ``NodeColumns`` object, and how many rows it has removed) and its node's
devices have not changed since: the manager passes every node whose generation
moved to ``invalidate`` before the verdicts are read.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

__all__ = ["UNKNOWN", "RowVerdicts"]

UNKNOWN = -1

Verdicts = npt.NDArray[np.int8]


class RowVerdicts:
    """Per claim signature, each node row's last Filter verdict."""

    def __init__(self) -> None:
        self._epoch: tuple[int, ...] | None = None
        self._columns: dict[str, Verdicts] = {}

    def column(self, signature: str, epoch: tuple[int, ...], size: int) -> Verdicts:
        """The verdicts of ``signature`` for rows ``[0, size)`` (at least), all unknown at first
        and after the epoch changes."""
        if epoch != self._epoch:
            self._epoch = epoch
            self._columns.clear()
        col = self._columns.get(signature)
        if col is None or len(col) < size:
            grown = np.full(max(1024, 2 * size), UNKNOWN, np.int8)
            if col is not None:
                grown[: len(col)] = col
            col = self._columns[signature] = grown
        return col

    def invalidate(self, rows: Iterable[int]) -> None:
        """These rows' nodes changed: their verdicts are unknown for every signature."""
        idx = np.fromiter(rows, np.int64)
        if not len(idx):
            return
        for col in self._columns.values():
            col[idx[idx < len(col)]] = UNKNOWN

    def clear(self) -> None:
        self._columns.clear()
