"""The name patterns of apimachinery's validation (``k8s.io/apimachinery/pkg/util/validation``),
compiled once for every module that checks a name, a namespace or a subdomain.

Each matches a whole string (``re.match`` with ``\\Z``); lengths are the callers' to check
(a label at most 63 characters, a subdomain 253), as their messages differ::

    >>> bool(DNS1123_LABEL.match("web-0")), bool(DNS1123_LABEL.match("web.0"))
    (True, False)
    >>> bool(DNS1123_SUBDOMAIN.match("example.com")), bool(DNS1035_LABEL.match("0web"))
    (True, False)
"""

from __future__ import annotations

import re

__all__ = ["DNS1035_LABEL", "DNS1123_LABEL", "DNS1123_SUBDOMAIN"]

# IsDNS1123Label: lower-case alphanumerics and '-', starting and ending alphanumeric
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
# IsDNS1123Subdomain: such labels joined by '.'
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
# IsDNS1035Label: a DNS-1123 label that starts with a letter
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")
