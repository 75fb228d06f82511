"""The HTTP API server: ``create_app(config)`` builds the ASGI application."""
