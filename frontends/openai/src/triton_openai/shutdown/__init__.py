"""Graceful shutdown: drain requests in flight, then end the ones that cannot finish
with an error their clients can see (see drain.py)."""

from .drain import Drain, InFlight
from .middleware import DrainMiddleware
from .server import DrainingServer

__all__ = ["Drain", "DrainMiddleware", "DrainingServer", "InFlight"]
