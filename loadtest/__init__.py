"""Load tests for controlplane (and any Kubernetes API server): Locust users that
behave like a cluster's clients, load shapes, the harness (``python -m loadtest
run SCENARIO``) and its report. See docs/operations.md."""
