"""Gets through a shape's plan (vineyard.data.tensor.numpy_plan): the second
get of a tree shape makes its array without parsing the tree, and must
return exactly what the parse and resolver return."""

from __future__ import annotations

import numpy as np
import pytest
import vineyard
from vineyard import client as client_module
from vineyard.data import tensor

# (value, whether the second and third gets of its shape go through a plan)
VALUES = [
    (np.arange(10, dtype=np.uint8), True),
    (np.arange(12, dtype=np.float64).reshape(3, 4), True),
    (np.arange(24, dtype=np.int32).reshape(2, 3, 4), True),
    (np.array(5, dtype=np.int16), True),
    (np.array([1 + 2j, 3 - 4j], dtype=np.complex128), True),
    (np.array([True, False, True]), True),
    (np.arange(8, dtype=">u4"), True),  # big-endian: its dtype text differs from native
    (np.array(["a", "bc"]), True),  # fixed-width unicode is a plain dtype
    (np.zeros(0, dtype=np.float32), False),  # empty: the resolver's zeros
    (np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)), False),  # upstream's F layout: a copy
    (np.array([{"a": 1}, None], dtype=object), False),  # pickled
]


def _plans_used(monkeypatch) -> list[int]:
    """Counts the arrays plans returned (the plan functions are wrapped)."""
    used: list[int] = []
    made = tensor.numpy_plan

    def counting(tree, parts):
        plan = made(tree, parts)
        if plan is None:
            return None

        def wrapped(parts, pin):
            out = plan(parts, pin)
            if out is not None:
                used.append(1)
            return out

        return wrapped

    monkeypatch.setattr(client_module, "numpy_plan", counting)
    monkeypatch.setattr(client_module, "_plans", {})
    return used


@pytest.mark.parametrize(("value", "plannable"), VALUES, ids=[f"{v.dtype.str}{list(v.shape)}" for v, _ in VALUES])
def test_a_planned_get_equals_the_parsed_one(client, vineyard_socket, monkeypatch, value, plannable):
    used = _plans_used(monkeypatch)
    ids = [client.put(value) for _ in range(3)]
    with vineyard.connect(vineyard_socket) as other:  # first gets of each object
        got = [other.get(i) for i in ids]
        parsed = got[0]  # the shape's first get: parsed and resolved
        assert len(used) == (2 if plannable else 0)
        for g in got:
            assert type(g) is np.ndarray
            assert (g.dtype, g.shape, g.strides) == (parsed.dtype, parsed.shape, parsed.strides)
            assert g.flags.writeable == parsed.flags.writeable
            assert g.flags.c_contiguous == parsed.flags.c_contiguous
            assert g.flags.f_contiguous == parsed.flags.f_contiguous
            assert g.dtype == value.dtype and g.shape == value.shape
            np.testing.assert_array_equal(g, value)
        del got, parsed
    client.delete(ids)


def test_a_plan_keeps_the_object_pinned(client, vineyard_socket, monkeypatch):
    used = _plans_used(monkeypatch)
    ids = [client.put(np.full(1000, i, dtype=np.int64)) for i in range(2)]
    with vineyard.connect(vineyard_socket) as other:
        other.get(ids[0])
        view = other.get(ids[1])
        assert used == [1]
        client.delete(ids[1])  # hidden at once, its memory kept while the view lives
        for i in range(50):  # new puts would reuse freed memory
            client.put(np.full(1000, -1, dtype=np.int64))
        assert (view == 1).all()


def test_a_new_resolver_takes_over_from_the_plan(client, vineyard_socket, monkeypatch):
    used = _plans_used(monkeypatch)
    ids = [client.put(np.arange(4, dtype=np.int8)) for _ in range(3)]
    with vineyard.connect(vineyard_socket) as other:
        other.get(ids[0])
        other.get(ids[1])
        assert used == [1]
        monkeypatch.setattr("vineyard.data.registry._resolvers", dict(vineyard.data.registry._resolvers))
        vineyard.register_resolver("vineyard::Tensor<int8>", lambda session, tree, pin: "mine")
        try:
            assert other.get(ids[2]) == "mine"
        finally:
            vineyard.data.registry._by_typename.clear()
        assert used == [1]
