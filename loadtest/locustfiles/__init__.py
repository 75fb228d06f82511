"""Locust user classes that behave like a Kubernetes cluster's clients.

One module per kind of client (``controllers``, ``kubelets``, ``informers``,
``operators``, ``binder``, ``gang``), each runnable alone for debugging
(``python -m loadtest.locustfiles.kubelets URL``); ``base`` holds what they
share; ``scenario`` is the locustfile the harness runs, which picks the classes,
counts and load shape of ``LOADTEST_SCENARIO``.
"""
