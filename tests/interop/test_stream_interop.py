"""Streams across clients: upstream Vineyard's client (0.24.2) and ours, each
as writer and as reader of the other, through our daemon (and through
upstream's daemon, ours as the client of both roles' other side): record
batch chunks (put, then pushed), DataFrame-stream chunks (IPC bytes written
into upstream's get_next_stream_chunk buffers, or ours), byte chunks. Order
and content are checked by the reader."""

from __future__ import annotations

import pytest

KINDS = ["recordbatch", "dataframe", "byte"]
DIRECTIONS = [("ours", "upstream"), ("upstream", "ours")]


@pytest.mark.parametrize("daemon", ["ours", "upstream"])
@pytest.mark.parametrize("writer,reader", DIRECTIONS, ids=["ours-to-upstream", "upstream-to-ours"])
@pytest.mark.parametrize("kind", KINDS)
def test_stream_crosses(agents, daemon: str, writer: str, reader: str, kind: str) -> None:
    n = 8
    made = agents(writer, daemon).call(cmd="stream_write", kind=kind, n=n)
    got = agents(reader, daemon).call(cmd="stream_read", kind=kind, id=made["id"], n=n)
    assert got["n"] == n
