"""Controllers of kube-controller-manager, as API clients (see each module)."""
