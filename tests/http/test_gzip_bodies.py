"""Gzip request bodies: every member is read, within the size limit, and a bomb fails cleanly."""

from __future__ import annotations

import gzip

import pytest

from governance_http.body import GzipTooLarge, UnreadableGzip, gunzip


def test_every_member_of_a_multi_member_body_is_read() -> None:
    body = gzip.compress(b'{"a":') + gzip.compress(b"1") + gzip.compress(b"}")
    assert gunzip(body, 100) == b'{"a":1}'
    assert gzip.decompress(body) == gunzip(body, 100)


def test_the_limit_counts_all_members_together() -> None:
    body = gzip.compress(b"x" * 60) + gzip.compress(b"y" * 60)
    assert len(gunzip(body, 120)) == 120
    with pytest.raises(GzipTooLarge, match="larger than 119 bytes"):
        gunzip(body, 119)


def test_a_gzip_bomb_stops_at_the_limit() -> None:
    # 1 GiB of zeros in about 1 MiB: 16 members of 64 MiB each.
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024), 9) * 16
    assert len(bomb) < 2 * 1024 * 1024
    with pytest.raises(GzipTooLarge):
        gunzip(bomb, 10 * 1024 * 1024)
    small_members = gzip.compress(b"\0" * (1024 * 1024), 9) * 11
    with pytest.raises(GzipTooLarge):
        gunzip(small_members, 10 * 1024 * 1024)


def test_a_cut_or_foreign_body_is_unreadable() -> None:
    whole = gzip.compress(b"hello") + gzip.compress(b"world")
    with pytest.raises(UnreadableGzip, match="truncated"):
        gunzip(whole[:-3], 100)
    with pytest.raises(UnreadableGzip, match="cannot be read"):
        gunzip(gzip.compress(b"hello") + b"not gzip", 100)
    with pytest.raises(UnreadableGzip):
        gunzip(b"", 100)
