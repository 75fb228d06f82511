"""PEM blocks as Go's pem.Decode finds them (registry/pem.py), which trust bundles and
PodCertificateRequests' chains are read with."""

from __future__ import annotations

import doctest

from controlplane.registry import pem
from controlplane.registry.trustbundles import MAX_TRUST_BUNDLE_SIZE, prepare_cluster_trust_bundle


def test_the_module_examples() -> None:
    assert doctest.testmod(pem).failed == 0


def test_a_begin_pairs_with_the_first_end_after_it() -> None:
    """Trailing blanks aside, headers up to a blank line skipped; a BEGIN whose first END is
    another type's, or whose body is no base64, passed over (the regular expression before
    paired a BEGIN with a later END of its own type: ``X`` here swallowed ``Y``)."""
    text = ("junk\n-----BEGIN CERTIFICATE-----\nProc-Type: 4\n\nQUJD\n-----END CERTIFICATE-----  \r\n"
            "-----BEGIN X-----\n-----BEGIN Y-----\nQQ==\n-----END Y-----\n-----BEGIN Z-----\n%%%\n-----END Z-----\n"
            "-----BEGIN W-----\nQg==\n-----END X-----\n")
    assert pem.blocks(text) == [("CERTIFICATE", True, b"ABC"), ("Y", False, b"A")]
    # a body that is no base64 is passed over, the BEGIN inside it found
    assert pem.blocks("-----BEGIN A-----\n%\n-----BEGIN B-----\nQQ==\n-----END B-----\n-----END A-----\n") == [
        ("B", False, b"A")]


def test_a_bundle_of_begin_lines_without_an_end_is_refused() -> None:
    """A trust bundle of nearly 1 MiB of BEGIN lines and no END: one pass now (the regular
    expression before took 5 s of the event loop's CPU over 100 KiB, a hundred times that over
    1 MiB), and no trust anchor."""
    trust = "-----BEGIN A-----\n" * (MAX_TRUST_BUNDLE_SIZE // 18)
    assert pem.blocks(trust) == []
    bundle = {"apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle", "metadata": {"name": "b"},
              "spec": {"trustBundle": trust}}
    causes = prepare_cluster_trust_bundle(bundle, None)
    assert [c["message"] for c in causes] == [
        'Invalid value: "<value omitted>": at least one trust anchor must be provided'], causes


def test_begin_lines_closed_by_one_end_far_below_are_passed_over_in_one_pass() -> None:
    """Nearly 1 MiB of BEGIN lines, then one END of their type: each BEGIN's body (the lines
    down to that END) was joined and decoded, 40 s of the event loop over 280 KiB; a body with
    a line base64 refuses is now passed over without it. The last BEGIN's empty body decodes."""
    trust = "-----BEGIN A-----\n" * (MAX_TRUST_BUNDLE_SIZE // 18 - 1) + "-----END A-----\n"
    assert pem.blocks(trust) == [("A", False, b"")]
    with_headers = "-----BEGIN A-----\nK: v\n" * 20000 + "-----END A-----\n"
    assert pem.blocks(with_headers) == [("A", True, b"")]
