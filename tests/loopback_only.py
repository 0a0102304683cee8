"""A guard for the whole test session: no test reaches any address but this machine's.

Tests start their servers (HTTP, S3, Dask clusters) on 127.0.0.1; a client left without its
endpoint (an ``s3://`` URL without ``storage_options``) would otherwise try the real service.
:func:`install` makes name lookups of other hosts and connections to other addresses raise
``OSError`` at once, so such a test fails fast instead of waiting on the network.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

__all__ = ["install"]

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def _local(host: Any) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host)
    if host.lower() in _LOCAL_NAMES or host == socket.gethostname():
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback or host in ("0.0.0.0", "::")
    except ValueError:
        return False


def install() -> None:
    """Refuse lookups of other hosts and connections to non-loopback addresses."""
    lookup = socket.getaddrinfo
    connect = socket.socket.connect
    connect_ex = socket.socket.connect_ex

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _local(host):
            raise OSError(f"tests reach only this machine: lookup of {host!r} refused")
        return lookup(host, *args, **kwargs)

    def guarded(method: Any) -> Any:
        def call(self: socket.socket, address: Any) -> Any:
            if self.family in (socket.AF_INET, socket.AF_INET6) and not _local(address[0]):
                raise OSError(f"tests reach only this machine: connection to {address!r} "
                              "refused")
            return method(self, address)
        return call

    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]
    socket.socket.connect = guarded(connect)  # type: ignore[method-assign]
    socket.socket.connect_ex = guarded(connect_ex)  # type: ignore[method-assign]
