"""Resource types served by the API server (see ``types``)."""

from .types import BUILTIN, Registry, ResourceType

__all__ = ["BUILTIN", "Registry", "ResourceType"]
