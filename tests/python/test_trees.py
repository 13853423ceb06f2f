"""vineyard._trees.loads: the value of json.loads, built from a cached shape
when only ids and signatures differ. Needs no daemon."""

from __future__ import annotations

import json

import pytest
from vineyard import _trees


def _tensor(oid: int, bid: int, sig: int, shape: str = "[1]") -> bytes:
    return (f'{{"id":"o{oid:016x}","instance_id":0,"nbytes":8,"order_":"\\"C\\"","shape_":"{shape}",'
            f'"signature":{sig},"transient":true,"typename":"vineyard::Tensor<int64>","f":1.5,"n":null,'
            f'"l":[1,"o{bid:016x}",{{"x":false}}],'
            f'"buffer_":{{"id":"o{bid:016x}","typename":"vineyard::Blob","length":8}}}}').encode()


@pytest.fixture(autouse=True)
def _fresh_shapes():
    _trees._shapes.clear()
    yield
    _trees._shapes.clear()


def test_a_cached_shape_builds_the_same_value():
    first = _tensor(1, 1 << 63 | 2, 3)
    assert _trees.loads(first) == json.loads(first)
    assert len(_trees._shapes) == 1 and next(iter(_trees._shapes.values())) is not None
    for oid, bid, sig in ((5, 1 << 63 | 6, 7), (0xFFFF_FFFF_FFFF, 1 << 63 | 0xABC, -9), (8, 9, 0)):
        raw = _tensor(oid, bid, sig)
        got = _trees.loads(raw)
        assert got == json.loads(raw)
        assert got["id"] == f"o{oid:016x}" and got["signature"] == sig and got["l"][1] == f"o{bid:016x}"
    assert len(_trees._shapes) == 1
    # Each call makes new dicts: a caller may change its tree.
    a, b = _trees.loads(first), _trees.loads(first)
    a["buffer_"]["id"] = "changed"
    assert b["buffer_"]["id"] == f"o{1 << 63 | 2:016x}"


def test_other_shapes_are_other_entries():
    _trees.loads(_tensor(1, 2, 3))
    raw = _tensor(1, 2, 3, shape="[2]")
    assert _trees.loads(raw) == json.loads(raw)
    assert len(_trees._shapes) == 2


@pytest.mark.parametrize("raw", [
    b'{"o0000000000000001":{"id":"o0000000000000002"}}',  # an id as a key
    b'{"a":"\\"o0000000000000001","id":"o0000000000000002"}',  # an id-like text inside a string
    b'{"id":"o0000000000000002","x":NaN}',
    b'{"id":"o0000000000000002","x":-Infinity}',
    b'{"id":"o0000000000000002","id":"o0000000000000003"}',  # a duplicate key
])
def test_shapes_it_cannot_check_are_parsed_every_time(raw):
    for _ in range(2):
        assert _trees.loads(raw) == json.loads(raw)
    assert list(_trees._shapes.values()) in ([None], [])


def test_an_id_like_text_inside_a_string_never_pairs_with_an_escaped_id():
    # The split finds one match (inside a's string) and misses b's id (written
    # with a \u escape); the walk finds one id (b's): equal counts, wrong pairs.
    first = b'{"a":"x\\"o0000000000000001","b":"\\u006f0000000000000002"}'
    second = b'{"a":"x\\"o0000000000000003","b":"\\u006f0000000000000002"}'
    for raw in (first, second, second):
        assert _trees.loads(raw) == json.loads(raw)


@pytest.mark.parametrize("raw", [
    b'{"id":"o0000000000000002"',
    b'{"id":"o0000000000000002","signature":0123}',
    b"",
])
def test_bad_json_is_refused_as_json_loads_refuses_it(raw):
    _trees.loads(b'{"id":"o0000000000000001","signature":1}')
    with pytest.raises(json.JSONDecodeError):
        _trees.loads(raw)


def test_the_cache_is_bounded():
    for n in range(_trees._MAX_SHAPES + 10):
        _trees.loads(f'{{"id":"o0000000000000001","n":[{",".join(["0"] * (n + 1))}]}}'.encode())
    assert len(_trees._shapes) <= _trees._MAX_SHAPES


def test_a_shape_is_compiled_when_seen_again_and_small():
    # Compiling costs ~100 json.loads: a shape seen once is only parsed.
    _trees.loads(_tensor(1, 2, 3))
    assert list(_trees._shapes.values()) == [_trees._SEEN]
    _trees.loads(_tensor(4, 5, 6))
    assert callable(next(iter(_trees._shapes.values())))
    # A tree of more ids than _MAX_VARS is parsed every time, never compiled.
    n = _trees._MAX_VARS + 1
    big = ("[" + ",".join(f'{{"id":"o{i:016x}"}}' for i in range(n)) + "]").encode()
    for _ in range(3):
        assert _trees.loads(big) == json.loads(big)
    assert list(_trees._shapes.values())[-1] is None
