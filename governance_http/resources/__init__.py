"""Thin responders: parse the request, call the core once, set the response media."""

from governance_http.resources.operations import OperationResource, request_members
from governance_http.resources.service import OpenApiResource, PingResource

__all__ = ["OpenApiResource", "OperationResource", "PingResource", "request_members"]
