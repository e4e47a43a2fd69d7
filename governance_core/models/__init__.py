"""Typed records: attrs frozen classes mirroring what is stored, grouped by family."""
