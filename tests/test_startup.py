"""What a process of ours imports at start: nothing it does not use (every server, CLI and
Locust worker pays it)."""

from __future__ import annotations

import subprocess
import sys


def test_the_server_does_not_import_httpx_s_command_line_client() -> None:
    # httpx's package imports its CLI (rich, pygments): 0.13 s a start; controlplane/__init__ declines it
    code = ("import sys, controlplane.cli, controlplane.api.app, httpx; "
            "print(sorted(m for m in ('rich', 'pygments') if m in sys.modules), httpx.Client.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "Client"]


def test_loading_the_api_definitions_does_not_import_a_json_schema_validator() -> None:
    # the definitions are kubernetes-validate's files; its package imports jsonschema (0.15 s)
    code = ("import sys\nfrom controlplane.registry import schema\n"
            "d = schema.definitions()\n"
            "print(sorted(m for m in ('kubernetes_validate', 'jsonschema') if m in sys.modules), "
            "d.for_kind('', 'v1', 'Pod') is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "True"]
