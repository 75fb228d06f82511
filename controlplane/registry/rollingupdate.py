"""A DaemonSet's ``spec.updateStrategy`` as upstream's ``ValidateDaemonSetUpdateStrategy``
and ``ValidateRollingUpdateDaemonSet`` check it (pkg/apis/apps/validation), a
Deployment's ``spec.strategy.rollingUpdate`` as ``ValidateRollingUpdateDeployment`` does,
and a StatefulSet's ``spec.updateStrategy`` as ``ValidateStatefulSetSpec`` and
``validateRollingUpdateStatefulSet`` do, with the int-or-percent rules their
``maxUnavailable`` and ``maxSurge`` share (``ValidatePositiveIntOrPercent``,
``IsNotMoreThan100Percent``).

The strategy is checked once defaulted (``workloads``): a RollingUpdate strategy always has
its ``rollingUpdate`` then, so upstream's "Required value" for a missing one is never said.
An int-or-percent is an int (not negative) or a string of digits and ``%``; a percent is at
most 100%; exactly one of a DaemonSet's ``maxUnavailable`` and ``maxSurge`` is not zero, a
StatefulSet's ``maxUnavailable`` is not zero and its ``partition`` not negative. A bad value is
printed as IntOrString's ``String()`` prints it, without quotes::

    daemon_set_strategy_causes({"type": "RollingUpdate", "rollingUpdate":
                                {"maxUnavailable": "150%", "maxSurge": 0}}, "spec.updateStrategy")
    # [{'field': 'spec.updateStrategy.rollingUpdate.maxUnavailable',
    #   'message': 'Invalid value: 150%: must not be greater than 100%', ...}]
"""

from __future__ import annotations

import re
from typing import Any

from .causes import Causes, cause, required

__all__ = ["daemon_set_strategy_causes", "deployment_rolling_update_causes", "int_or_percent_causes",
           "stateful_set_strategy_causes"]

_PERCENT = re.compile(r"[0-9]+%")
_ATOI = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi reads
_PERCENT_HINT = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or "
                 "'93%', regex used for validation is '[0-9]+%')")
_DAEMON_SET_STRATEGIES = ("RollingUpdate", "OnDelete")  # in upstream's order, not sorted


def _shown(value: Any) -> str:
    """An IntOrString as its ``String()`` gives it: a string as it is, an int in decimal."""
    return value if isinstance(value, str) else str(value)


def _invalid(field: str, value: Any, detail: str) -> dict[str, str]:
    return cause("FieldValueInvalid", field, f"Invalid value: {_shown(value)}: {detail}")


def _percent(value: Any) -> int | None:
    """The number of a valid percent string (``"25%"`` is 25), else None."""
    if isinstance(value, str) and _PERCENT.fullmatch(value):
        return int(value[:-1])
    return None


def _amount(value: Any) -> int:
    """``getIntOrPercentValue``: a percent's number, an int, or a string's ``Atoi`` (0 when it
    reads none), which only tells zero from not zero here."""
    percent = _percent(value)
    if percent is not None:
        return percent
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if isinstance(value, str) and _ATOI.fullmatch(value) else 0


def int_or_percent_causes(value: Any, field: str) -> Causes:
    """``ValidatePositiveIntOrPercent``: a percent string, or an int not negative (the schema
    lets nothing else through)."""
    if isinstance(value, str):
        return [] if _PERCENT.fullmatch(value) else [_invalid(field, value, _PERCENT_HINT)]
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [_invalid(field, value, "must be greater than or equal to 0")]
    return []


def _over_100_percent(value: Any, field: str) -> Causes:
    """``IsNotMoreThan100Percent``: a valid percent over 100 (anything else passes)."""
    percent = _percent(value)
    return [_invalid(field, value, "must not be greater than 100%")] if percent is not None and percent > 100 else []


def _rolling_update_causes(rolling: dict[str, Any], path: str) -> Causes:
    """``ValidateRollingUpdateDaemonSet``, its causes in upstream's order: each bound an
    int-or-percent, neither over 100%, and exactly one of them not zero (a surge starts a
    node's new pod before its old one goes, an unavailable budget after; the controller has
    no strategy doing both)."""
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    at_unavailable, at_surge = f"{path}.maxUnavailable", f"{path}.maxSurge"
    causes = int_or_percent_causes(unavailable, at_unavailable) + int_or_percent_causes(surge, at_surge)
    causes += _over_100_percent(unavailable, at_unavailable) + _over_100_percent(surge, at_surge)
    has_unavailable, has_surge = _amount(unavailable) != 0, _amount(surge) != 0
    if has_unavailable and has_surge:
        causes.append(_invalid(at_surge, surge, "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        causes.append(required(at_unavailable, "cannot be 0 when maxSurge is 0"))
    return causes


def deployment_rolling_update_causes(rolling: Any, path: str) -> Causes:
    """``ValidateRollingUpdateDeployment``, in upstream's order: each bound an int-or-percent,
    not both zero (a rollout that could neither start a new pod nor stop an old one), and
    ``maxUnavailable`` at most 100% (a surge may be more)."""
    if not isinstance(rolling, dict):
        return []
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    at_unavailable = f"{path}.maxUnavailable"
    causes = int_or_percent_causes(unavailable, at_unavailable) + int_or_percent_causes(surge, f"{path}.maxSurge")
    if _amount(unavailable) == 0 and _amount(surge) == 0:
        causes.append(_invalid(at_unavailable, unavailable, "may not be 0 when `maxSurge` is 0"))
    return causes + _over_100_percent(unavailable, at_unavailable)


def _strategy_value(strategy: dict[str, Any]) -> str:
    """The strategy as Go's ``%#v`` prints the internal struct (a pointer as an address)."""
    rolling = strategy.get("rollingUpdate")
    pointer = "(*apps.RollingUpdateDaemonSet)(nil)" if rolling is None else \
        "(*apps.RollingUpdateDaemonSet)(0xc000000000)"
    kind = strategy.get("type")
    return f'apps.DaemonSetUpdateStrategy{{Type:"{kind if isinstance(kind, str) else ""}", RollingUpdate:{pointer}}}'


def daemon_set_strategy_causes(strategy: Any, path: str) -> Causes:
    """``ValidateDaemonSetUpdateStrategy`` of a defaulted ``strategy`` at ``path``: OnDelete
    (its ``rollingUpdate``, if any, unchecked and unused, as upstream), or RollingUpdate with
    valid bounds; any other type is reported on the whole strategy."""
    if not isinstance(strategy, dict):
        return []
    kind = strategy.get("type")
    if kind == "OnDelete":
        return []
    if kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        return _rolling_update_causes(rolling, f"{path}.rollingUpdate") if isinstance(rolling, dict) else []
    listed = ", ".join(f'"{v}"' for v in _DAEMON_SET_STRATEGIES)
    return [cause("FieldValueNotSupported", path,
                  f"Unsupported value: {_strategy_value(strategy)}: supported values: {listed}")]


def _stateful_rolling_value(rolling: dict[str, Any]) -> str:
    """A StatefulSet's ``rollingUpdate`` as Go's ``%#v`` prints the internal struct (its
    partition an int32, its bound a pointer, printed as an address)."""
    partition = rolling.get("partition")
    partition = partition if isinstance(partition, int) and not isinstance(partition, bool) else 0
    bound = "(*intstr.IntOrString)(nil)" if rolling.get("maxUnavailable") is None else \
        "(*intstr.IntOrString)(0xc000000000)"
    return f"apps.RollingUpdateStatefulSetStrategy{{Partition:{partition}, MaxUnavailable:{bound}}}"


def _stateful_strategy_value(strategy: dict[str, Any]) -> str:
    """A StatefulSet's strategy as Go's ``%#v`` prints the internal struct."""
    pointer = "(*apps.RollingUpdateStatefulSetStrategy)(nil)" if strategy.get("rollingUpdate") is None else \
        "(*apps.RollingUpdateStatefulSetStrategy)(0xc000000000)"
    kind = strategy.get("type")
    return (f'apps.StatefulSetUpdateStrategy{{Type:"{kind if isinstance(kind, str) else ""}", '
            f"RollingUpdate:{pointer}}}")


def _stateful_rolling_update_causes(rolling: dict[str, Any], path: str) -> Causes:
    """``validateRollingUpdateStatefulSet``: a partition not negative; a ``maxUnavailable``
    given is an int-or-percent, not zero (a rollout that could stop no pod), at most 100%."""
    partition = rolling.get("partition")
    causes: Causes = []
    if isinstance(partition, int) and not isinstance(partition, bool) and partition < 0:
        causes.append(_invalid(f"{path}.partition", partition, "must be greater than or equal to 0"))
    bound = rolling.get("maxUnavailable")
    if bound is None:
        return causes
    at = f"{path}.maxUnavailable"
    causes += int_or_percent_causes(bound, at)
    if _amount(bound) == 0:
        causes.append(_invalid(at, bound, "cannot be 0"))
    return causes + _over_100_percent(bound, at)


def stateful_set_strategy_causes(strategy: Any, path: str) -> Causes:
    """A defaulted StatefulSet ``strategy`` at ``path``, as ``ValidateStatefulSetSpec`` checks
    it: OnDelete without ``rollingUpdate``, or RollingUpdate with valid parameters; any other
    type is reported on the whole strategy (an empty one was defaulted to RollingUpdate)."""
    if not isinstance(strategy, dict):
        return []
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    if kind == "OnDelete":
        if not isinstance(rolling, dict):
            return []
        return [_invalid(f"{path}.rollingUpdate", _stateful_rolling_value(rolling),
                                "only allowed for updateStrategy 'RollingUpdate'")]
    if kind == "RollingUpdate":
        return _stateful_rolling_update_causes(rolling, f"{path}.rollingUpdate") if isinstance(rolling, dict) else []
    return [_invalid(path, _stateful_strategy_value(strategy), "must be 'RollingUpdate' or 'OnDelete'")]

