"""DLPack: what a get returns goes to NumPy, torch, JAX and TensorFlow without
a copy (the consumer's data pointer is the store's), flagged read-only where
the consumer takes DLPack 1.0, and pinned while the consumer holds it; a put
takes any DLPack producer. torch, JAX and TensorFlow are optional
(requirements-torch.txt, requirements-jax.txt, requirements-tensorflow.txt):
their tests skip without them."""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest
import vineyard.dlpack
from vineyard import _handles
from vineyard.dlpack import DLPackCapsule, to_dlpack

FLAG_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY


def pin_of(arr):
    """The Pin a got array's memory hangs on (its base chain)."""
    base = arr
    while base is not None:
        if isinstance(base, _handles.Pin):
            return base
        pin = getattr(base, "pin", None)
        if isinstance(pin, _handles.Pin):
            return pin
        base = getattr(base, "base", None)
    raise AssertionError(f"no pin under {arr!r}")


def capsule_data(capsule):
    """(name, data pointer, flags or None) of a DLPack capsule."""
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.argtypes, get_name.restype = [ctypes.py_object], ctypes.c_char_p
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.argtypes, get_ptr.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p
    name = get_name(capsule)
    ptr = get_ptr(capsule, name)
    if name == b"dltensor_versioned":
        flags = ctypes.c_uint64.from_address(ptr + 24).value
        return name, ctypes.c_void_p.from_address(ptr + 32).value, flags
    return name, ctypes.c_void_p.from_address(ptr).value, None


@pytest.fixture
def stored(client):
    value = np.arange(4096, dtype=np.float64).reshape(64, 64)
    return client, client.put(value), value  # no array: the tests hold the only references


def test_numpy_from_dlpack_is_the_store(stored):
    client, oid, value = stored
    arr = client.get(oid)
    out = np.from_dlpack(arr)
    assert out.ctypes.data == arr.ctypes.data
    assert not out.flags.writeable
    np.testing.assert_array_equal(out, value)


def test_versioned_capsule_is_flagged_read_only(stored):
    client, oid, _ = stored
    arr = client.get(oid)
    name, data, flags = capsule_data(arr.__dlpack__(max_version=(1, 0)))
    assert name == b"dltensor_versioned" and data == arr.ctypes.data and flags & FLAG_READ_ONLY


def test_legacy_capsule_for_old_consumers(stored):
    client, oid, value = stored
    arr = client.get(oid)
    with pytest.raises(BufferError):  # NumPy's own refusal: a legacy capsule cannot say read-only
        arr.__dlpack__()
    capsule = to_dlpack(arr)
    name, data, _ = capsule_data(capsule)
    assert name == b"dltensor" and data == arr.ctypes.data
    out = np.from_dlpack(DLPackCapsule(capsule))
    assert out.ctypes.data == arr.ctypes.data
    np.testing.assert_array_equal(out, value)
    name, data, flags = capsule_data(to_dlpack(arr, versioned=True))
    assert name == b"dltensor_versioned" and data == arr.ctypes.data and flags & FLAG_READ_ONLY


def test_blob_exports_both_kinds(client):
    blob = client.get_blob(_blob(client, b"vineyard" * 512))
    assert blob.__dlpack_device__() == (1, 0)
    name, data, flags = capsule_data(blob.__dlpack__(max_version=(1, 0)))
    assert name == b"dltensor_versioned" and data == blob.address and flags & FLAG_READ_ONLY
    name, data, _ = capsule_data(blob.__dlpack__())
    assert name == b"dltensor" and data == blob.address
    out = np.from_dlpack(blob)
    assert out.ctypes.data == blob.address and bytes(out) == b"vineyard" * 512
    copied = np.from_dlpack(blob, copy=True)
    assert copied.ctypes.data != blob.address and copied.flags.writeable and bytes(copied) == bytes(out)


def _blob(client, data):
    builder = client.create_blob(len(data))
    builder.copy(0, data)
    return builder.seal()


def test_capsule_keeps_the_object_pinned(stored):
    client, oid, value = stored
    arr = client.get(oid)
    pin = weakref.ref(pin_of(arr))
    capsule = to_dlpack(arr)  # never consumed
    del arr
    gc.collect()
    assert pin() is not None, "a capsule must keep its object pinned"
    del capsule
    gc.collect()
    assert pin() is None, "a capsule collected unconsumed must release its pin"

    arr = client.get(oid)
    pin = weakref.ref(pin_of(arr))
    out = np.from_dlpack(DLPackCapsule(to_dlpack(arr)))
    address = arr.ctypes.data
    del arr
    client.delete(oid)
    filler = [client.put(np.full(4096, -1.0)) for _ in range(64)]  # reuse any memory the delete freed
    gc.collect()
    assert pin() is not None and out.ctypes.data == address
    np.testing.assert_array_equal(out, value)  # still the stored bytes: pinned across the delete
    del out
    gc.collect()
    assert pin() is None, "the consumer's deleter must release the pin"
    client.delete(filler)


class Producer:
    """A minimal DLPack producer of another library (here over NumPy)."""

    def __init__(self, arr, device=(1, 0)):
        self.arr, self.device = arr, device

    def __dlpack__(self, **kw):
        return self.arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.device


def test_put_takes_any_producer(client):
    value = np.random.default_rng(1).standard_normal((7, 5)).astype(np.float32)
    np.testing.assert_array_equal(client.get(client.put(Producer(value))), value)
    np.testing.assert_array_equal(client.get(client.put(value.__dlpack__())), value)  # a bare capsule
    with pytest.raises(ValueError, match="CUDA.*copy it to the CPU"):
        client.put(Producer(value, device=(2, 0)))


def test_torch_is_the_store(stored):
    torch = pytest.importorskip("torch")
    client, oid, value = stored
    arr = client.get(oid)
    t = torch.from_dlpack(arr)
    assert t.data_ptr() == arr.ctypes.data
    np.testing.assert_array_equal(t.numpy(), value)
    pin = weakref.ref(pin_of(arr))
    del arr
    gc.collect()
    assert pin() is not None, "a torch tensor over the store must keep its object pinned"
    del t
    gc.collect()
    assert pin() is None
    # and back: a torch tensor put and got again
    blob_t = torch.arange(10, dtype=torch.int32)
    got = client.get(client.put(blob_t))
    assert torch.equal(got, blob_t)


def test_jax_is_the_store(client):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    value = np.arange(4096, dtype=np.float32).reshape(64, 64)  # JAX's default: no 64-bit floats without a copy
    arr = client.get(client.put(value))
    with pytest.raises(BufferError):  # JAX asks NumPy for a legacy capsule, which it refuses for read-only memory
        jnp.from_dlpack(arr)
    j = jnp.from_dlpack(vineyard.dlpack.producer(arr))
    assert j.unsafe_buffer_pointer() == arr.ctypes.data
    np.testing.assert_array_equal(np.asarray(j), value)
    pin = weakref.ref(pin_of(arr))
    del arr
    gc.collect()
    assert pin() is not None, "a JAX array over the store must keep its object pinned"
    del j
    gc.collect()
    assert pin() is None
    k = jax.numpy.arange(100, dtype=jnp.float32) * 2
    np.testing.assert_array_equal(client.get(client.put(k)), np.asarray(k))  # a JAX array is a producer


# TensorFlow runs in a process of its own: it and torch each load an LLVM, and
# importing torch._dynamo after tensorflow aborts the process ("Option
# 'bitcode-mdindex-threshold' registered more than once"), so a pytest process
# that imported tensorflow kills test_torch's later tests.
TENSORFLOW_CHILD = r"""
import gc, sys, weakref
import numpy as np
import tensorflow as tf
import vineyard
from vineyard.dlpack import to_dlpack
sys.path.insert(0, sys.argv[2])
from test_dlpack import capsule_data, pin_of

client = vineyard.connect(sys.argv[1])
value = np.arange(4096, dtype=np.float64).reshape(64, 64)
arr = client.get(client.put(value))
t = tf.experimental.dlpack.from_dlpack(to_dlpack(arr))
_, data, _ = capsule_data(tf.experimental.dlpack.to_dlpack(t))
assert data == arr.ctypes.data, "TensorFlow copied the store's bytes"
np.testing.assert_array_equal(t.numpy(), value)
pin = weakref.ref(pin_of(arr))
del arr
gc.collect()
assert pin() is not None, "a TensorFlow tensor over the store must keep its object pinned"
del t
gc.collect()
assert pin() is None
u = tf.constant(np.arange(12, dtype=np.int64).reshape(3, 4))
np.testing.assert_array_equal(client.get(client.put(u)), u.numpy())  # a tensor is a producer
np.testing.assert_array_equal(client.get(client.put(tf.experimental.dlpack.to_dlpack(u))), u.numpy())
print("tensorflow-ok")
"""


def test_tensorflow_is_the_store(vineyard_socket):
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed (requirements-tensorflow.txt)")
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run(
        [sys.executable, "-c", TENSORFLOW_CHILD, vineyard_socket, here],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0 and "tensorflow-ok" in proc.stdout, proc.stdout + proc.stderr[-4000:]