"""The Kubernetes CEL libraries in CRD rules: upstream's functions, evaluated."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.registry.expressions import ExpressionError, evaluate
from controlplane.registry.structural import validate


@pytest.mark.parametrize("expression", [
    # strings
    "'ABCé'.lowerAscii() == 'abcé' && 'abc'.upperAscii() == 'ABC'",
    "'a/b/c'.split('/') == ['a', 'b', 'c'] && 'a/b/c'.split('/', 2) == ['a', 'b/c'] && 'a'.split('/', 0) == []",
    "'abc'.indexOf('c') == 2 && 'abcabc'.indexOf('a', 1) == 3 && 'abcabc'.lastIndexOf('a') == 3",
    "'aaa'.replace('a', 'b') == 'bbb' && 'aaa'.replace('a', 'b', 1) == 'baa'",
    "'abc'.substring(1) == 'bc' && 'abc'.substring(0, 2) == 'ab' && ' a '.trim() == 'a'",
    "'abc'.charAt(1) == 'b' && 'abc'.charAt(3) == '' && 'abc'.reverse() == 'cba'",
    "['a', 'b'].join('-') == 'a-b' && ['a', 'b'].join() == 'ab'",
    # lists
    "[1, 2, 3].isSorted() && ![2, 1].isSorted() && [1, 2, 3].sum() == 6 && [3, 1].min() == 1 && [3, 1].max() == 3",
    "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && [1].indexOf(5) == -1",
    # regex, in Go's syntax
    "'ab12cd3'.find('[0-9]+') == '12' && 'ab12cd3'.findAll('[0-9]') == ['1', '2', '3'] && 'x'.find('y') == ''",
    # URLs
    "isURL('https://example.com:8443/a?b=c') && !isURL('example.com') && !isURL('https://x/#frag')",
    "url('https://u@example.com:8443/a?b=c').getHost() == 'example.com:8443'",
    "url('https://[::1]:80/').getHostname() == '::1' && url('https://example.com/').getPort() == ''",
    "url('http://x/a%20b').getEscapedPath() == '/a%20b' && url('http://x/?k=1&k=2').getQuery()['k'] == ['1', '2']",
    # IPs and CIDRs
    "isIP('10.0.0.1') && isIP('fd00::1') && !isIP('::ffff:1.2.3.4') && !isIP('fe80::1%eth0') && !isIP('1.2.3')",
    "ip('10.0.0.1').family() == 4 && ip('::1').isLoopback() && ip('0.0.0.0').isUnspecified()",
    "ip('fe80::1').isLinkLocalUnicast() && ip('224.0.0.1').isLinkLocalMulticast() && ip('8.8.8.8').isGlobalUnicast()",
    "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0') && cidr('10.0.0.0/8').containsIP('10.1.2.3')",
    "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && !cidr('10.0.0.0/8').containsIP('11.0.0.1')",
    "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && !cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')",
    "cidr('10.1.2.3/8').prefixLength() == 8 && cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8')",
    "cidr('10.1.2.3/8').ip() == ip('10.1.2.3')",
    # quantities
    "quantity('1Gi').isGreaterThan(quantity('1G')) && isQuantity('250m') && !isQuantity('x')",
])
def test_the_kubernetes_libraries_are_there(expression: str) -> None:
    assert evaluate(expression, {"self": {}}) is True


def test_a_library_function_that_fails_is_a_rule_that_fails_to_run() -> None:
    for expression in ("'abc'.substring(4)", "[].min()", "ip('x')", "url('nope')"):
        with pytest.raises(ExpressionError):
            evaluate(expression, {"self": {}})


def test_gateway_apis_label_key_rule_runs() -> None:
    # gateway.networking.k8s.io Gateway spec.infrastructure.labels
    schema: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
    schema["x-kubernetes-validations"] = [
        {"rule": 'self.all(key, key.split("/")[0].size() < 253)',
         "message": "If specified, the label key's prefix must be a DNS subdomain not longer than 253 characters"}]
    assert validate(schema, {"example.com/team": "a"}, "spec.infrastructure.labels") == []
    (cause,) = validate(schema, {"a" * 253 + "/team": "a"}, "spec.infrastructure.labels")
    assert cause["message"] == ("Invalid value: If specified, the label key's prefix must be a DNS subdomain not "
                                "longer than 253 characters")


def test_matches_is_a_global_function_too() -> None:
    # Gateway API's safe-upgrades ValidatingAdmissionPolicy
    assert evaluate("matches(self, 'v1.[0-3].\\\\d+') && !matches(self, 'v0') && self.matches('^v1')",
                    {"self": "v1.2.3"}) is True


def test_only_global_matches_calls_are_renamed() -> None:
    from controlplane.registry.cellibs import GLOBAL_MATCHES, with_global_matches

    assert with_global_matches("matches(a, 'x') && !matches (b, 'y')") == \
        f"{GLOBAL_MATCHES}(a, 'x') && !{GLOBAL_MATCHES}(b, 'y')"
    for unchanged in ("self.matches('^a')", "self.x.matches('a')", "'matches(x)' == s", '"""matches(""" == s',
                      "nomatches(x)", r"'it\'s matches(x)' == s"):
        assert with_global_matches(unchanged) == unchanged
