"""What a stored record is to every layer: a JSON-ready mapping of field names to values."""

from __future__ import annotations

from typing import Any

__all__ = ["Record"]

Record = dict[str, Any]
"""One stored record: a resource's fields by name, as the store keeps and answers them."""
