"""The locustfile the harness runs: ``locust -f loadtest/locustfiles/scenario.py``.

It reads the plan the harness put in the environment (``LOADTEST_PARAMS``, see
``loadtest.scenarios``) and exports exactly its user classes, with their
fixed counts or weights, and a load shape that walks its stage table. The
shape ends the run when the table ends, or earlier when the harness creates
the file named by ``LOADTEST_STOP_FILE`` (a quota run that has finished).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from locust import LoadTestShape, events
from locust.env import Environment

from loadtest import shapes
from loadtest.locustfiles import workers
from loadtest.locustfiles.base import PARAMS

__all__: list[str] = []


@events.init.add_listener  # type: ignore[untyped-decorator]
def _watch_workers(environment: Environment, **_: Any) -> None:
    # the master records the workers that leave the run (a remote one killed), for the harness;
    # importing workers made a missed heartbeat count after 30 s, not Locust's 3
    workers.install(environment)

_FIXED: dict[str, int] = PARAMS.get("_fixed", {})
_WEIGHTED: dict[str, int] = PARAMS.get("_weighted", {})
_MODULES = {
    "BinderUser": "binder", "KubeletUser": "kubelets", "InformerUser": "informers",
    "ReplicaSetController": "controllers", "OperatorUser": "operators", "TrainingJobUser": "gang",
}


def _user_class(name: str, attrs: dict[str, Any]) -> type:
    module = importlib.import_module(f"loadtest.locustfiles.{_MODULES[name]}")
    base: type = getattr(module, name)
    return type(name, (base,), {"__module__": __name__, **attrs})


for _name, _count in _FIXED.items():
    if _count > 0:
        globals()[_name] = _user_class(_name, {"fixed_count": _count, "weight": 1})
for _name, _weight in _WEIGHTED.items():
    if _name not in _FIXED:
        globals()[_name] = _user_class(_name, {"weight": _weight, "fixed_count": 0})


def _table() -> shapes.Table:
    return tuple(shapes.Stage(float(u), int(n), float(r), str(label)) for u, n, r, label in PARAMS.get("_table", ()))


class StageShape(LoadTestShape):
    """The plan's stage table; see ``loadtest.shapes``."""

    table = _table() or shapes.steady(1, 10)
    stop_file = os.environ.get("LOADTEST_STOP_FILE", "")

    def tick(self) -> tuple[int, float] | None:
        if self.stop_file and os.path.exists(self.stop_file):
            return None
        return shapes.users_at(self.table, self.get_run_time())  # type: ignore[no-untyped-call]
