"""The name patterns of apimachinery's validation (``k8s.io/apimachinery/pkg/util/validation``),
compiled once for every module that checks a name, a namespace or a subdomain, and the rule
of names that need only be a URL path segment (``path_segment_problems``).

Each matches a whole string (``re.match`` with ``\\Z``); lengths are the callers' to check
(a label at most 63 characters, a subdomain 253), as their messages differ::

    >>> bool(DNS1123_LABEL.match("web-0")), bool(DNS1123_LABEL.match("web.0"))
    (True, False)
    >>> bool(DNS1123_SUBDOMAIN.match("example.com")), bool(DNS1035_LABEL.match("0web"))
    (True, False)
"""

from __future__ import annotations

import re

__all__ = ["DNS1035_LABEL", "DNS1035_MESSAGE", "DNS1123_LABEL", "DNS1123_SUBDOMAIN", "LABEL_MESSAGE",
           "SUBDOMAIN_MESSAGE", "dns1035_problems", "dns_label_name_problems", "path_segment_problems"]

# IsDNS1123Label: lower-case alphanumerics and '-', starting and ending alphanumeric
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
# IsDNS1123Subdomain: such labels joined by '.'
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
# IsDNS1035Label: a DNS-1123 label that starts with a letter
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")

# what IsDNS1123Subdomain says of a string its pattern refuses
SUBDOMAIN_MESSAGE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                     "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                     "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")

# what IsDNS1123Label says of a string its pattern refuses (and that is no subdomain either)
LABEL_MESSAGE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                 "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")

# what IsDNS1035Label says of a string its pattern refuses
DNS1035_MESSAGE = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                   "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                   "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def dns1035_problems(name: str) -> list[str]:
    """What apimachinery's ``IsDNS1035Label`` says of ``name``: too long, then its pattern's words."""
    problems = ["must be no more than 63 characters"] if len(name) > 63 else []
    if not DNS1035_LABEL.match(name):
        problems.append(DNS1035_MESSAGE)
    return problems


def dns_label_name_problems(name: str) -> list[str]:
    """What apimachinery's ``IsDNS1123Label`` says of ``name``: too long, then, if its pattern
    refuses it, ``must not contain dots`` for a subdomain, else its pattern's words."""
    problems = ["must be no more than 63 characters"] if len(name) > 63 else []
    if not DNS1123_LABEL.match(name):
        problems.append("must not contain dots" if DNS1123_SUBDOMAIN.match(name) else LABEL_MESSAGE)
    return problems


def path_segment_problems(name: str) -> list[str]:
    """Why ``name`` cannot be a segment of a URL path (apimachinery's ``IsValidPathSegmentName``,
    the name rule of RBAC objects, whose names hold ``:``); empty when it can."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]
