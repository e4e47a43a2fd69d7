"""Typed records: attrs frozen classes mirroring what is stored, grouped by family."""

__all__: list[str] = []
