"""Karpenter's runtime validation of a NodePool: what its CRD's schema and CEL rules
do not check, which Karpenter's ``nodepool.validation`` controller does
(``NodePool.RuntimeValidate``, ``pkg/apis/v1/nodepool_validation.go`` and
``nodeclaim_validation.go``). A NodePool that fails it is stored all the same (the
API server's answer is 201), then gets ``ValidationSucceeded=False`` (reason
``NodePoolValidationFailed``, the errors as message) and so ``Ready=False``, and
provisions nothing until it is corrected.

Only the checks the CRD leaves to it are made here (the others, a restricted key,
an operator, ``In`` without values, cannot reach it):

- template labels: keys qualified names (the CRD checks no key), values label values;
- taints and startup taints: key and value qualified names (the CRD's pattern has
  no length limit), no two with the same key and effect;
- requirements: keys qualified names, values label values (Karpenter's CRD puts
  its pattern and ``maxLength: 63`` on the ``values`` array, where they check
  nothing), and ``karpenter.sh/capacity-type In`` naming at least one value
  there is (``on-demand``, ``spot``, ``reserved``), and as many as ``minValues``.

>>> runtime_errors({"spec": {"template": {"spec": {"requirements": [
...     {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["ondemand"]}]}}}})
['invalid value: no valid values found in [ondemand] for karpenter.sh/capacity-type, expected one of: \
map[on-demand:{} reserved:{} spot:{}], got: [ondemand] in requirements, restricted']
"""

from __future__ import annotations

import json
from typing import Any

from ..registry.podvalidation import label_key_problems, label_value_problems
from .labels import CAPACITY_TYPE

__all__ = ["KNOWN_VALUES", "runtime_errors"]

Obj = dict[str, Any]

# Karpenter's WellKnownValuesForRequirements: a requirement (In) on these keys must name one of them
KNOWN_VALUES: dict[str, frozenset[str]] = {CAPACITY_TYPE: frozenset(("on-demand", "spot", "reserved"))}
# Karpenter's NormalizedLabels: a requirement on the old name is one on the new
_NORMALIZED = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
               "beta.kubernetes.io/arch": "kubernetes.io/arch",
               "beta.kubernetes.io/os": "kubernetes.io/os",
               "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
               "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}


def _quote(s: str) -> str:
    """Go's ``%q`` of a printable string."""
    return json.dumps(s, ensure_ascii=False)


def _go_list(values: list[str]) -> str:
    """Go's ``%v`` of a ``[]string``."""
    return "[" + " ".join(values) + "]"


def _labels(labels: Obj) -> list[str]:
    errors = []
    for k in sorted(labels):
        errors += [f"invalid key name {_quote(k)} in labels, {_quote(p)}" for p in label_key_problems(k)]
        value = str(labels[k])
        errors += [f"invalid value: {value} for label[{k}], {p}" for p in label_value_problems(value)]
    return errors


def _taints(spec: Obj) -> list[str]:
    errors = []
    seen: set[tuple[str, str]] = set()
    for field in ("taints", "startupTaints"):
        for t in spec.get(field) or ():
            k, value, effect = str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or "")
            errors += [f"invalid value: {p} in {field}" for p in label_key_problems(k)]
            if value:
                errors += [f"invalid value: {p} in {field}" for p in label_key_problems(value)]
            if (k, effect) in seen:
                errors.append(f"duplicate taint Key/Effect pair {k}={effect}")
            seen.add((k, effect))
    return errors


def _requirement(r: Obj) -> list[str]:
    k = str(r.get("key") or "")
    k = _NORMALIZED.get(k, k)
    values = [str(v) for v in r.get("values") or ()]
    errors = []
    known = KNOWN_VALUES.get(k)
    if known is not None and r.get("operator") == "In":
        valid = [v for v in values if v in known]
        shown = "map[" + " ".join(f"{v}:{{}}" for v in sorted(known)) + "]"
        if not valid:
            errors.append(f"no valid values found in {_go_list(values)} for {k}, expected one of: {shown}, "
                          f"got: {_go_list([v for v in values if v not in known])}")
        elif r.get("minValues") is not None and len(valid) < int(r["minValues"]):
            errors.append(f"not enough valid values found in {_go_list(values)} for {k}, expected at least "
                          f"{int(r['minValues'])} valid values from: {_go_list(sorted(known))}, got: {len(valid)}")
    errors += [f"key {k} is not a qualified name, {p}" for p in label_key_problems(k)]
    errors += [f"invalid value {v} for key {k}, {p}" for v in values for p in label_value_problems(v)]
    return errors


def runtime_errors(nodepool: Obj) -> list[str]:
    """Why Karpenter's runtime validation refuses ``nodepool``, in its words and order
    (labels, taints, requirements); empty when it passes. The errors of one
    requirement make one, joined by ``; `` as Go's multierr."""
    template = (nodepool.get("spec") or {}).get("template") or {}
    spec = template.get("spec") or {}
    errors = _labels((template.get("metadata") or {}).get("labels") or {}) + _taints(spec)
    for r in spec.get("requirements") or ():
        problems = _requirement(r)
        if problems:
            errors.append(f"invalid value: {'; '.join(problems)} in requirements, restricted")
    return errors
