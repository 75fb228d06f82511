"""The API client of the emulator's own components (scheduler, nodes, autoscaler).

``Client`` makes REST calls and watches, over a socket or in process;
``Informer`` keeps a collection's objects in step with the server.
"""

from .client import PATCH_TYPES, ApiError, Client, KubeconfigError, WatchEvent, resource_path
from .informer import Informer, InformerHandle, SharedInformer, held_in, object_key
from .transport import InProcessTransport

__all__ = ["PATCH_TYPES", "ApiError", "Client", "InProcessTransport", "Informer", "InformerHandle", "KubeconfigError",
           "SharedInformer", "WatchEvent", "held_in", "object_key", "resource_path"]
