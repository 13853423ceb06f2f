"""torch tensors: every dtype and layout round-trips; get is zero-copy over a
private copy-on-write view that never changes the store. Skipped without torch."""

from __future__ import annotations

import gc
import json
import multiprocessing as mp
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import vineyard
from vineyard import _handles
from vineyard._session import Session

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # torch's beta/experimental notices

QUANTIZED = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}
DTYPES = sorted({v for v in vars(torch).values() if isinstance(v, torch.dtype)} - QUANTIZED, key=str)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


@pytest.fixture(autouse=True)
def no_leaked_views():
    """Every test must leave no private view mapped once its tensors are gone."""
    before = _handles.live_views()
    yield
    if _handles.live_views() != before:
        gc.collect()  # slow with torch loaded: only when reference counting was not enough
    assert _handles.live_views() == before


def random_tensor(dtype, shape, seed=0):
    """A tensor of any dtype with random bytes (bool: 0 or 1)."""
    g = torch.Generator().manual_seed(seed)
    n = max(1, int(np.prod(shape))) * dtype.itemsize
    raw = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)
    if dtype == torch.bool:
        raw %= 2
    return raw.view(dtype)[: int(np.prod(shape))].reshape(shape)


def raw_bytes(t):
    """The bytes of a tensor's values in row-major order, for any dtype (NaNs
    and exotic dtypes compare by bits; torch cannot copy int1..int7)."""
    carrier = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(t.element_size(), t.dtype)
    return t.view(carrier).contiguous().numpy().tobytes()


def roundtrip(client, value):
    return client.get(client.put(value))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("variant", ["contiguous", "non-contiguous", "0-d", "empty"])
def test_every_dtype_roundtrips(client, dtype, variant):
    if variant == "contiguous":
        t = random_tensor(dtype, (3, 5))
    elif variant == "non-contiguous":
        t = random_tensor(dtype, (6, 4)).t()[:, ::2]  # (4, 3), strides (1, 8)
        assert not t.is_contiguous()
    elif variant == "0-d":
        t = random_tensor(dtype, ())
    else:
        t = random_tensor(dtype, (0, 3))
    got = roundtrip(client, t)
    assert isinstance(got, torch.Tensor)
    assert got.dtype == dtype and got.shape == t.shape and got.is_contiguous()
    assert raw_bytes(got) == raw_bytes(t)


def test_dense_typename_follows_upstream(client):
    oid = client.put(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    meta = client.get_meta(oid)
    assert meta.typename == "vineyard::Tensor<torch.float32>"
    assert meta["value_type_"] == "torch.float32" and meta["value_type_meta_"] == "<f4"
    assert json.loads(meta["shape_"]) == [2, 3] and meta["order_"] == "C"


def test_conjugate_and_negative_views_are_resolved(client):
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    assert torch.equal(roundtrip(client, z.conj()), z.conj().resolve_conj())
    assert torch.equal(roundtrip(client, z.conj().imag), z.conj().imag.resolve_neg())


def test_grad_and_subclasses_come_back_as_plain_tensors(client):
    p = torch.nn.Parameter(torch.randn(3, 3))
    got = roundtrip(client, p)
    assert type(got) is torch.Tensor and not got.requires_grad
    assert torch.equal(got, p.detach())
    leaf = torch.randn(4, requires_grad=True)
    assert torch.equal(roundtrip(client, leaf * 2), (leaf * 2).detach())


def sparse_source(dtype=torch.float32):
    d = torch.randn(6, 8)
    d[d < 0.3] = 0
    return d.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.int32, torch.bfloat16],
                         ids=str)
@pytest.mark.parametrize("layout", ["coo", "coo-uncoalesced", "coo-hybrid", "csr", "csr-int32", "csc", "bsr",
                                    "bsc", "csr-batched"])
def test_sparse_layouts_roundtrip(client, dtype, layout):
    d = sparse_source(dtype)
    if layout == "coo":
        s = d.to_sparse()
    elif layout == "coo-uncoalesced":
        s = torch.sparse_coo_tensor(torch.tensor([[0, 0, 5], [1, 1, 7]]), torch.tensor([1, 2, 3]).to(dtype), (6, 8))
        d = s.to_dense()
    elif layout == "coo-hybrid":
        s = d.to_sparse(1)  # one sparse dim, one dense
    elif layout == "csr":
        s = d.to_sparse_csr()
    elif layout == "csr-int32":
        c = d.to_sparse_csr()
        s = torch.sparse_csr_tensor(c.crow_indices().int(), c.col_indices().int(), c.values(), c.shape)
    elif layout == "csc":
        s = d.to_sparse_csc()
    elif layout == "bsr":
        s = d.to_sparse_bsr((2, 4))
    elif layout == "bsc":
        s = d.to_sparse_bsc((3, 2))
    else:
        d = torch.stack([d, d * 2])
        s = d.to_sparse_csr()
    got = roundtrip(client, s)
    assert got.layout == s.layout and got.dtype == dtype and got.shape == s.shape
    if s.layout == torch.sparse_coo:
        assert got.is_coalesced() == s.is_coalesced()
        assert got.sparse_dim() == s.sparse_dim() and got.dense_dim() == s.dense_dim()
    else:
        assert got.values().shape == s.values().shape  # blocksize kept
        assert got.crow_indices().dtype == s.crow_indices().dtype if s.layout in (
            torch.sparse_csr, torch.sparse_bsr) else True
    assert torch.equal(got.to_dense(), d)


QUANTIZED_CASES = [(d, "per_tensor") for d in (torch.quint8, torch.qint8, torch.qint32, torch.quint4x2, torch.quint2x4)]
QUANTIZED_CASES += [(d, "per_channel") for d in (torch.quint8, torch.qint8, torch.qint32)]
QUANTIZED_CASES += [(d, "float_qparams") for d in (torch.quint8, torch.quint4x2)]  # all torch has


@pytest.mark.parametrize(("dtype", "scheme"), QUANTIZED_CASES, ids=str)
def test_quantized_roundtrips(client, dtype, scheme):
    x = torch.randn(4, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if scheme == "per_tensor":
            q = torch.quantize_per_tensor(x, 0.05, 2 if dtype != torch.qint32 else 0, dtype)
        elif scheme == "per_channel":
            q = torch.quantize_per_channel(x, torch.rand(6, dtype=torch.float64) + 0.01,
                                           torch.randint(0, 3, (6,)), 1, dtype)
        else:
            q = torch.quantize_per_channel(x, torch.rand(4) + 0.01, torch.rand(4), 0, dtype)
    got = roundtrip(client, q)
    assert got.is_quantized and got.dtype == dtype and got.qscheme() == q.qscheme() and got.shape == q.shape
    assert torch.equal(got.int_repr(), q.int_repr())
    assert torch.equal(got.dequantize(), q.dequantize())
    if scheme == "per_tensor":
        assert (got.q_scale(), got.q_zero_point()) == (q.q_scale(), q.q_zero_point())
    else:
        assert torch.equal(got.q_per_channel_scales(), q.q_per_channel_scales())
        assert torch.equal(got.q_per_channel_zero_points(), q.q_per_channel_zero_points())
        assert got.q_per_channel_axis() == q.q_per_channel_axis()


def test_quantized_non_contiguous(client):
    q = torch.quantize_per_tensor(torch.randn(5, 4), 0.1, 3, torch.quint8).t()[1:]
    got = roundtrip(client, q)
    assert torch.equal(got.dequantize(), q.dequantize()) and got.is_contiguous()


def test_put_creates_all_buffers_at_once_and_the_tree_at_once(client, monkeypatch):
    calls = []
    for name in ("create_blob", "create"):
        real = getattr(Session, name)
        monkeypatch.setattr(Session, name, lambda *a, _real=real, _name=name: (calls.append(_name), _real(*a))[1])
    values = [
        sparse_source().to_sparse(),
        sparse_source().to_sparse_bsr((2, 4)),
        torch.quantize_per_channel(torch.randn(4, 6), torch.rand(6, dtype=torch.float64) + 0.1,
                                   torch.zeros(6, dtype=torch.int64), 1, torch.qint8),
        torch.nested.nested_tensor_from_jagged(torch.randn(10, 3), torch.tensor([0, 4, 8]),
                                               lengths=torch.tensor([2, 3])),
    ]
    for value in values:
        calls.clear()
        client.put(value)
        assert calls == ["create_blob", "create"], value.layout


def unbound_equal(a, b):
    xs, ys = a.unbind(), b.unbind()
    return len(xs) == len(ys) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(xs, ys))


@pytest.mark.parametrize("kind", ["jagged", "jagged-lengths", "jagged-dim2", "strided", "strided-ragged-2d",
                                  "strided-transposed", "strided-empty"])
def test_nested_roundtrips(client, kind):
    if kind == "jagged":
        nt = torch.nested.nested_tensor([torch.randn(2, 5), torch.randn(3, 5)], layout=torch.jagged)
    elif kind == "jagged-lengths":
        nt = torch.nested.nested_tensor_from_jagged(torch.randn(10, 3), torch.tensor([0, 4, 8]),
                                                    lengths=torch.tensor([2, 3]))
    elif kind == "jagged-dim2":
        nt = torch.nested.nested_tensor_from_jagged(torch.randn(3, 7, 4), torch.tensor([0, 2, 7]), jagged_dim=2)
    elif kind == "strided":
        nt = torch.nested.nested_tensor([torch.randn(2, 5), torch.randn(3, 5)])
    elif kind == "strided-transposed":
        nt = torch.nested.nested_tensor([torch.randn(2, 5), torch.randn(3, 5)]).transpose(1, 2)
        assert not nt.is_contiguous()
    elif kind == "strided-empty":
        nt = torch.nested.nested_tensor([])
    else:
        nt = torch.nested.nested_tensor([torch.randn(2, 5), torch.randn(3, 4), torch.randn(1, 1)])
    got = roundtrip(client, nt)
    assert got.is_nested and got.layout == nt.layout and got.dtype == nt.dtype
    assert unbound_equal(got, nt)


# -- zero copy and copy-on-write ------------------------------------------

def mapping_of(address):
    """The mapping of this process that holds address: its smaps header
    (start, perms, file offset, dev, inode, path) and fields ("Rss", ...)."""
    found, fields = None, {}
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head[0].endswith(":"):
                if found:
                    fields[head[0][:-1]] = " ".join(head[1:])
                continue
            if found:
                break
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            if lo <= address < hi:
                found = {"start": lo, "perms": head[1], "offset": int(head[2], 16), "file": (head[3], head[4]),
                         "path": " ".join(head[5:])}
    assert found, f"no mapping holds {address:#x}"
    return found, fields


def file_offset(address):
    """(file, offset in it) of the byte at address."""
    m, _ = mapping_of(address)
    return m["file"], m["offset"] + address - m["start"]


def anonymous_kb(address):
    return int(mapping_of(address)[1]["Anonymous"].split()[0])


def test_get_is_zero_copy_and_copy_on_write(client, vineyard_socket):
    values = torch.arange(1 << 18, dtype=torch.float32)  # 1 MiB: 256 pages
    oid = client.put(values)
    bid = vineyard.ObjectID(client.get_meta(oid)["buffer_"]["id"])
    stored = client.get_blob(bid)  # the store's bytes, read-only shared view
    got = client.get(oid)
    mapping, _ = mapping_of(got.data_ptr())
    assert mapping["perms"] == "rw-p" and "vineyard-arena" in mapping["path"]  # a private mapping of the arena
    assert got.data_ptr() != stored.address
    assert file_offset(got.data_ptr()) == file_offset(stored.address)  # ... of the blob's very bytes
    assert got.sum().item() == values.sum().item()  # read every page
    assert anonymous_kb(got.data_ptr()) == 0  # ... all of them the store's pages: nothing copied
    assert raw_bytes(got) == bytes(stored)

    got[10] = -1.0  # one element: one page copied, privately
    assert anonymous_kb(got.data_ptr()) == 4
    got.add_(1)  # in-place on everything: works, private
    assert got[10].item() == 0.0 and got[11].item() == 12.0
    assert bytes(stored) == raw_bytes(values)  # the store is unchanged
    assert torch.equal(client.get(oid), values)  # a second get sees the original
    other = vineyard.connect(vineyard_socket)
    assert torch.equal(other.get(oid), values)  # so does another client


def test_get_cost_does_not_depend_on_size(client):
    """A 64 MiB get maps, it does not copy or touch: no page is resident."""
    oid = client.put(torch.ones(16 << 20, dtype=torch.float32))
    got = client.get(oid)
    _, fields = mapping_of(got.data_ptr())
    assert int(fields["Rss"].split()[0]) == 0  # nothing faulted in by the get itself
    assert got[-1].item() == 1.0


def test_views_live_as_long_as_the_storage(client, monkeypatch):
    unmapped = []
    real = _handles._unmap
    monkeypatch.setattr(_handles, "_unmap", lambda conn, address: (unmapped.append(address), real(conn, address)))
    base = _handles.live_views()
    got = roundtrip(client, torch.randn(64, 64))
    assert _handles.live_views() == base + 1
    part = got[1:3]  # shares the storage
    expected = part.clone()
    del got
    gc.collect()
    assert unmapped == [] and _handles.live_views() == base + 1
    assert torch.equal(part, expected)
    del part
    gc.collect()
    assert len(unmapped) == 1 and _handles.live_views() == base  # released exactly once
    sparse = roundtrip(client, sparse_source().to_sparse_csr())
    assert _handles.live_views() == base + 3  # compressed, plain indices and values
    del sparse
    gc.collect()
    assert len(unmapped) == 4 and _handles.live_views() == base


def test_tensor_outlives_delete_and_client(vineyard_socket):
    writer = vineyard.connect(vineyard_socket)
    values = torch.arange(1 << 16, dtype=torch.int64)
    oid = writer.put(values)
    writer.close()
    del writer
    gc.collect()  # the writer's connection, and its references, are gone
    reader = vineyard.connect(vineyard_socket)
    got = reader.get(oid)
    reader.delete(oid)
    assert not reader.exists(oid)
    filler = vineyard.connect(vineyard_socket)
    for _ in range(8):  # reuse freed memory as hard as possible
        filler.put(torch.full((1 << 16,), -7, dtype=torch.int64))
    reader.close()
    assert torch.equal(got, values)
    del got
    gc.collect()


def _child_get(sock, oid, q):
    import vineyard as v

    got = v.connect(sock).get(oid)
    q.put((type(got).__name__, str(got.dtype), got.double().sum().item()))


def test_spawn_child_gets_what_the_parent_put(client, vineyard_socket):
    values = torch.linspace(0, 1, 1000, dtype=torch.bfloat16)
    oid = client.put(values)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child_get, args=(vineyard_socket, int(oid), q))
    p.start()
    assert q.get(timeout=120) == ("Tensor", "torch.bfloat16", values.double().sum().item())
    p.join(30)
    assert p.exitcode == 0


def test_without_torch_dense_tensors_resolve_to_numpy(client, vineyard_socket):
    f32 = client.put(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    bf16 = client.put(torch.ones(3, dtype=torch.bfloat16))
    csr = client.put(sparse_source().to_sparse_csr())
    code = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None  # torch is not installed
        import numpy as np, vineyard
        c = vineyard.connect({vineyard_socket!r})
        a = c.get({int(f32)})
        assert isinstance(a, np.ndarray) and not a.flags.writeable, type(a)
        assert a.tolist() == [[0, 1, 2], [3, 4, 5]]
        for oid in ({int(bf16)}, {int(csr)}):
            try:
                c.get(oid)
            except ImportError as e:
                assert "needs torch" in str(e), e
            else:
                raise AssertionError("got a torch-only object without torch")
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_import_vineyard_does_not_import_torch():
    code = "import sys, vineyard; assert 'torch' not in sys.modules; print('ok')"
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60, env=ENV)
    assert r.stdout.strip() == "ok", r.stderr


def test_bad_tensors_and_trees_are_clear_errors(client):
    with pytest.raises(ValueError, match="meta device"):
        client.put(torch.empty(3, device="meta"))
    blob = client.create_blob(8)
    blob.copy(0, b"\0" * 8)
    bad_trees = [
        ({"value_type_": "torch.float32", "shape_": "[4]"}, "does not hold"),  # 16 bytes claimed, 8 stored
        ({"value_type_": "torch.nosuch", "shape_": "[2]"}, "unknown torch dtype"),
        ({"value_type_": "os.system", "shape_": "[2]"}, "unknown torch dtype"),
        ({"value_type_": "torch.qint8", "shape_": "[8]"}, "quantized"),
        ({"value_type_": "torch.uint8", "shape_": "[-8]"}, "bad shape_"),
    ]
    blob.seal(client)
    for fields, message in bad_trees:
        meta = vineyard.ObjectMeta({"typename": "vineyard::Tensor<torch.uint8>", **fields})
        meta.add_member("buffer_", blob.id)
        oid = client.create_metadata(meta).id
        with pytest.raises(ValueError, match=message):
            client.get(oid)



def altered(client, value, **changes):
    """The id of a copy of value's tree with some fields or members replaced
    (members by another value, stored)."""
    tree = client.get_meta(client.put(value))._tree
    meta = vineyard.ObjectMeta({k: v for k, v in tree.items() if k in ("typename", "value_type_")})
    for key, v in tree.items():
        if key in changes or key in ("typename", "value_type_"):
            continue
        if isinstance(v, dict):
            meta.add_member(key, vineyard.ObjectID(v["id"]))
        elif key.endswith("_"):
            meta[key] = v
    for key, v in changes.items():
        if isinstance(v, torch.Tensor):
            meta.add_member(key, client.put(v))
        else:
            meta[key] = v
    return client.create_metadata(meta).id


def test_trees_that_would_crash_torch_are_refused(client):
    """torch does not check these; a tensor built from them would read out of bounds."""
    coo = torch.tensor([[0.0, 1.0]]).to_sparse()
    qc = torch.quantize_per_channel(torch.randn(4, 6), torch.rand(6, dtype=torch.float64) + 0.1,
                                    torch.zeros(6, dtype=torch.int64), 1, torch.qint8)
    q = torch.quantize_per_tensor(torch.randn(4, 6), 0.1, 3, torch.quint8)
    nj = torch.nested.nested_tensor([torch.randn(2, 5), torch.randn(3, 5)], layout=torch.jagged)
    cases = [
        (altered(client, coo, shape_=[1, 1]), RuntimeError, "inconsistent with indices"),
        (altered(client, qc, axis_=0), ValueError, "per-channel"),  # 6 scales for 4 rows
        (altered(client, qc, axis_=5), ValueError, "per-channel"),
        (altered(client, q, shape_=[4, 7]), ValueError, "int_repr_"),  # 28 values in 24 bytes
        (altered(client, nj, offsets_=torch.tensor([0, 2, 9])), ValueError, "out of bounds"),
        (altered(client, nj, offsets_=torch.tensor([0.0, 2.0, 5.0])), ValueError, "jagged"),
        (altered(client, nj, ragged_idx_=3), ValueError, "jagged"),
        (altered(client, torch.randn(3), shape_=[2 ** 40, 2 ** 40]), ValueError, "does not hold"),
    ]
    for oid, kind, message in cases:
        with pytest.raises(kind, match=message):
            client.get(oid)
