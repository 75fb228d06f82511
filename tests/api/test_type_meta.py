"""A create or update body's apiVersion and kind held to the URL's type, in upstream's words
(api/typemeta.py): the decoder's 400s for a built-in type, the validator's 422 for a custom one."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.api.crds import CustomResourceDefinitions
from controlplane.api.errors import ApiError
from controlplane.api.typemeta import EVICTION_ALSO, EVICTION_TYPE, check_patched_type_meta, check_type_meta
from controlplane.registry import Registry, ResourceType
from tests.api.test_crds import definition

SCHEME = '"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30"'


@pytest.fixture(scope="module")
def registry() -> Registry:
    registry = Registry()
    crd_type = registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert crd_type is not None
    CustomResourceDefinitions(registry, crd_type).observe("widgets.example.com", definition(), 5)
    return registry


def rtype(registry: Registry, group: str, version: str, plural: str) -> ResourceType:
    found = registry.get(group, version, plural)
    assert found is not None
    return found


def refusal(registry: Registry, path: tuple[str, str, str], body: dict[str, Any]) -> ApiError:
    with pytest.raises(ApiError) as e:
        check_type_meta(registry, rtype(registry, *path), body, b'{"apiVersion":"v1"}')
    return e.value


@pytest.mark.parametrize(("path", "body"), [
    (("", "v1", "configmaps"), {}),
    (("", "v1", "configmaps"), {"apiVersion": "", "kind": ""}),  # Go's zero values: defaulted from the URL
    (("", "v1", "configmaps"), {"apiVersion": None, "kind": "ConfigMap"}),
    (("apps", "v1", "deployments"), {"apiVersion": "apps/v1", "kind": "Deployment"}),
    (("example.com", "v1", "widgets"), {"kind": "Widget"}),
])
def test_the_urls_type_or_none_is_taken(registry: Registry, path: tuple[str, str, str],
                                        body: dict[str, Any]) -> None:
    check_type_meta(registry, rtype(registry, *path), body, b"{}")


@pytest.mark.parametrize(("path", "body", "message"), [
    # the everyday mistake: a lower-case kind, which kubectl and create_from_yaml send as written
    (("", "v1", "pods"), {"apiVersion": "v1", "kind": "pod"},
     f'pod in version "v1" cannot be handled as a Pod: no kind "pod" is registered for version "v1" in scheme '
     f'{SCHEME}'),
    (("apps", "v1", "deployments"), {"kind": "deployment"},
     'deployment in version "v1" cannot be handled as a Deployment: no kind "deployment" is registered for '
     f'version "apps/v1" in scheme {SCHEME}'),
    (("", "v1", "configmaps"), {"apiVersion": "v2", "kind": "ConfigMap"},
     f'ConfigMap in version "v2" cannot be handled as a ConfigMap: no kind "ConfigMap" is registered for version '
     f'"v2" in scheme {SCHEME}'),
    # a kind the scheme knows, of another type: no conversion to the URL's
    (("", "v1", "configmaps"), {"apiVersion": "v1", "kind": "Pod"},
     'Pod in version "v1" cannot be handled as a ConfigMap: converting (v1.Pod) to (core.ConfigMap): unknown '
     'conversion'),
    (("batch", "v1", "jobs"), {"apiVersion": "apps/v1", "kind": "Deployment"},
     'Deployment in version "v1" cannot be handled as a Job: converting (v1.Deployment) to (batch.Job): unknown '
     'conversion'),
    # the URL's type in another served version decodes, then fails the handler's check
    (("autoscaling", "v1", "horizontalpodautoscalers"), {"apiVersion": "autoscaling/v2",
                                                         "kind": "HorizontalPodAutoscaler"},
     "the API version in the data (autoscaling/v2) does not match the expected API version (autoscaling/v1)"),
    (("events.k8s.io", "v1", "events"), {"apiVersion": "v1", "kind": "Event"},
     "the API version in the data (v1) does not match the expected API version (events.k8s.io/v1)"),
    (("example.com", "v1", "widgets"), {"apiVersion": "other.com/v1", "kind": "Widget"},
     "the API version in the data (other.com/v1) does not match the expected API version (example.com/v1)"),
    (("", "v1", "configmaps"), {"apiVersion": "v1", "kind": 5},
     'the object provided is unrecognized (must be of type ConfigMap): couldn\'t get version/kind; json parse '
     'error: json: cannot unmarshal number into Go struct field .kind of type string ({"apiVersion":"v1"})'),
])
def test_another_type_is_400_as_upstreams_decoder_or_handler_words_it(
        registry: Registry, path: tuple[str, str, str], body: dict[str, Any], message: str) -> None:
    e = refusal(registry, path, body)
    assert (e.code, e.reason, e.message) == (400, "BadRequest", message)


def test_a_custom_resource_of_another_kind_is_422_from_its_validator(registry: Registry) -> None:
    e = refusal(registry, ("example.com", "v1", "widgets"),
                {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "w"}})
    assert (e.code, e.reason) == (422, "Invalid")
    assert e.message == 'Widget.example.com "w" is invalid: kind: Invalid value: "Gadget": must be Widget'
    assert e.details is not None and e.details["causes"] == [
        {"reason": "FieldValueInvalid", "field": "kind", "message": 'Invalid value: "Gadget": must be Widget'}]


@pytest.mark.parametrize(("body", "message"), [
    ({"apiVersion": "v1", "kind": "Eviction"},
     f'Eviction in version "v1" cannot be handled as a Eviction: no kind "Eviction" is registered for version "v1" '
     f'in scheme {SCHEME}'),
    ({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget"},
     'PodDisruptionBudget in version "v1" cannot be handled as a Eviction: converting (v1.PodDisruptionBudget) to '
     '(policy.Eviction): unknown conversion'),
])
def test_an_eviction_is_a_policy_eviction(registry: Registry, body: dict[str, Any], message: str) -> None:
    for accepted in ({}, {"apiVersion": "policy/v1", "kind": "Eviction"},
                     {"apiVersion": "policy/v1beta1", "kind": "Eviction"}):  # the older one too, as upstream
        check_type_meta(registry, EVICTION_TYPE, accepted, b"{}", also=EVICTION_ALSO)
    with pytest.raises(ApiError) as e:
        check_type_meta(registry, EVICTION_TYPE, body, b"{}", also=EVICTION_ALSO)
    assert (e.value.code, e.value.message) == (400, message)


@pytest.mark.parametrize(("path", "patched", "why"), [
    (("", "v1", "configmaps"), {"apiVersion": "v1", "kind": "Secret"},
     "converting (v1.Secret) to (core.ConfigMap): unknown conversion"),
    (("", "v1", "configmaps"), {"apiVersion": "v2", "kind": "ConfigMap"},
     f'no kind "ConfigMap" is registered for version "v2" in scheme {SCHEME}'),
    (("apps", "v1", "deployments"), {"apiVersion": "apps/v1", "kind": "Frob"},
     f'no kind "Frob" is registered for version "apps/v1" in scheme {SCHEME}'),
])
def test_a_patch_naming_another_type_does_not_decode(registry: Registry, path: tuple[str, str, str],
                                                     patched: dict[str, Any], why: str) -> None:
    # the patch handler decodes the patched JSON into the URL's type: a JSON or merge patch of
    # kind or apiVersion was ignored, the object written as the URL's type
    with pytest.raises(ApiError) as e:
        check_patched_type_meta(registry, rtype(registry, *path), {**patched, "metadata": {"name": "x"}})
    assert (e.value.code, e.value.reason) == (422, "Invalid")
    assert e.value.message.startswith(' "" is invalid: patch: Invalid value: "{') and e.value.message.endswith(why)
    assert e.value.details is not None and e.value.details["causes"][0]["field"] == "patch"


def test_a_patch_naming_the_urls_type_or_none_or_another_version_of_it_decodes(registry: Registry) -> None:
    hpa = rtype(registry, "autoscaling", "v2", "horizontalpodautoscalers")
    for patched in ({}, {"kind": None, "apiVersion": ""}, {"apiVersion": "autoscaling/v1",
                                                           "kind": "HorizontalPodAutoscaler"}):
        check_patched_type_meta(registry, hpa, patched)
    widgets = rtype(registry, "example.com", "v1", "widgets")
    check_patched_type_meta(registry, widgets, {"kind": "Widget"})
    for patched, field, message in (({"kind": "Gadget"}, "kind", 'Invalid value: "Gadget": must be Widget'),
                                    ({"apiVersion": "example.com/v2"}, "apiVersion",
                                     'Invalid value: "example.com/v2": must be example.com/v1')):
        with pytest.raises(ApiError) as e:  # the custom resource validator's
            check_patched_type_meta(registry, widgets, {**patched, "metadata": {"name": "w"}})
        assert (e.value.code, e.value.message) == (422, f'Widget.example.com "w" is invalid: {field}: {message}')
