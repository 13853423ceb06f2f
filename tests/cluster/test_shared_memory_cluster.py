"""vineyard.shared_memory across daemons of one cluster: a named block is
attached by name from another daemon (its bytes copied there once)."""

from __future__ import annotations

import uuid

import pytest
from vineyard import shared_memory


def test_named_block_attached_from_another_daemon(cluster):
    a, b = cluster.a.connect(), cluster.b.connect()
    name = f"block-{uuid.uuid4().hex[:8]}"
    block = shared_memory.SharedMemory(a, name=name, create=True, size=1 << 16)
    block.buf[:5] = b"hello"
    block.freeze()
    there = shared_memory.SharedMemory(b, name)
    assert bytes(there.buf[:5]) == b"hello" and there.size == 1 << 16 and there.buf.readonly
    assert b.is_shared_memory(there._exporter)  # a view of b's memory: copied there
    again = shared_memory.SharedMemory(b, name)
    assert again.id == there.id  # the second attach reuses the copy
    sl = shared_memory.ShareableList(a, [1, "two", None], name=name + "-list").freeze()
    assert list(shared_memory.ShareableList(b, name=name + "-list")) == [1, "two", None]
    again.close()
    there.unlink()  # from b: the name goes cluster-wide
    with pytest.raises(FileNotFoundError):
        shared_memory.SharedMemory(a, name)
    assert bytes(block.buf[:5]) == b"hello"  # the creator's view stays valid
    block.close()
    sl.shm.close()
    sl.shm.unlink()
