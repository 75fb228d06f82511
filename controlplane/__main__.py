"""``python -m controlplane``: the same as the ``controlplane`` command."""

from controlplane.cli import main

raise SystemExit(main())
