"""Less common kubectl habits, with the real kubectl against one ``controlplane serve`` (the
e2e conftest's) over a socket, where they were answered otherwise than kube-apiserver does."""

from __future__ import annotations

from tests.e2e.test_kubectl import kubectl
from tests.e2e.test_kubectl_sweep import failing
from tests.test_cli import Serve


def test_a_field_selector_is_read_without_trimming_spaces(served: Serve) -> None:
    """Upstream's fields.ParseSelector splits each term at its operator and trims nothing
    (kubectl trims only the flag's ends): ``metadata.name = x`` names the field
    ``"metadata.name "``, which the field label conversion refuses (400), and
    ``metadata.name= x`` asks for the name " x", which no object has. Both selected ``x``
    here, so a selector that fails on a real cluster worked against this one."""
    kubectl(served, "create", "configmap", "spaced")
    kubectl(served, "run", "spaced", "--image=nginx")
    err = failing(served, "get", "configmaps", "--field-selector", "metadata.name = spaced")
    assert err.strip() == (
        'Error from server (BadRequest): Unable to find "/v1, Resource=configmaps" that match label selector "", '
        'field selector "metadata.name = spaced": "metadata.name " is not a known field selector: only '
        '"metadata.name", "metadata.namespace"')
    err = failing(served, "get", "pods", "--field-selector", "metadata.name=spaced, status.phase=Pending")
    assert err.strip().endswith('field label not supported:  status.phase')
    assert kubectl(served, "get", "configmaps", "--field-selector", "metadata.name= spaced", "-o", "name") == ""
    assert kubectl(served, "get", "pods", "--field-selector", "metadata.name=spaced,status.phase=Pending",
                   "-o", "name") == "pod/spaced\n"
    assert kubectl(served, "get", "configmaps", "--field-selector", "metadata.name=spaced",
                   "-o", "name") == "configmap/spaced\n"
