"""Whether a listener is open only to this machine: the one rule by which both HTTP front doors
(`debatebot web`'s page and API, and `/mcp` on `serve` and `web`) decide that no token is
needed (the local user is trusted, as over stdio)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
