"""The local web page: a stdlib server on loopback over the analysis API (:mod:`.server`)."""

from llmath.web.server import make_server

__all__ = ["make_server"]
