"""The tree text the daemon returns is JSON for every key and value: control
characters, U+007F, U+2028 and escapes in keys of fields and of members come
back from get_data (get_meta), the directory (get_object) and list as JSON
that json.loads reads, with the same content."""

from __future__ import annotations

import numpy as np
import pytest
from vineyard import ObjectMeta
from vineyard.errors import MetaTreeInvalidException

KEYS = ["\x7f", "\x01", "a\u2028b", 'q"uote', "\u00e9", "tab\t", "\\"]


@pytest.mark.parametrize("key", KEYS)
def test_every_key_comes_back_as_json(client, key):
    member = client.put(np.arange(3))
    meta = ObjectMeta()
    meta["typename"] = "test::Keys"
    meta["field" + key] = "v" + key
    meta.add_member(key, member)
    created = client.create_metadata(meta)

    got = client.get_meta(created.id)  # get_data, parsed by json.loads
    assert got["field" + key] == "v" + key
    assert got.member(key).id == member
    obj = client.get_object(created.id)  # the directory's record, parsed by _trees.loads
    assert obj.meta["field" + key] == "v" + key
    listed = [m for m in client.list_metadatas("test::Keys", limit=0) if m.id == created.id]
    assert listed and listed[0]["field" + key] == "v" + key
    client.delete(created.id, deep=False)


def test_a_tree_that_json_cannot_carry_is_refused(client):
    meta = ObjectMeta()
    meta["typename"] = "test::Bad"
    meta["lone"] = "\ud800"
    assert '"\\ud800"' in meta.to_json()  # json.dumps escapes it: the daemon sees the escape
    with pytest.raises(MetaTreeInvalidException):
        client.create_metadata(meta)
