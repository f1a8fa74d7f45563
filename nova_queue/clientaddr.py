"""One name per client of a network service, from its address: an IPv4 address as it is,
an IPv6 one by its /64 (one subscriber's usual allocation: a client cannot rotate through
2^64 addresses of its own), an IPv4-mapped IPv6 one as its IPv4 address, anything else
(a unix socket's empty name) as a digest. The gallery's unlock rate limit and live-socket
caps and the gateway's connection cap count clients by this name."""

from __future__ import annotations

import hashlib
import ipaddress


def client_name(address: str) -> str:
    """The name a client at ``address`` is counted under."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "other-" + hashlib.sha256(address.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return f"{ipaddress.IPv6Network((ip, 64), strict=False).network_address}/64"
    return str(ip)
