"""The etcd backend (``etcd://HOST:PORT[,HOST:PORT...]``): the store on a real etcd v3 cluster,
spoken to through etcd's gRPC JSON gateway. See ``backend``."""

from .backend import RESERVED_PREFIX, EtcdStore

__all__ = ["RESERVED_PREFIX", "EtcdStore"]
