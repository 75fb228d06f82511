"""controlplane: an emulator of the Kubernetes control plane (see README.md)."""

import sys

# httpx's package imports its command-line client at import (``httpx._main``: rich, pygments),
# about 0.13 s of every process's start here (a server, a CLI, a Locust worker) for the
# ``httpx`` console script, which none of them runs. A None entry makes that one import fail,
# which httpx's ``__init__`` catches: ``httpx.main`` becomes its stub, the client is the same.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
