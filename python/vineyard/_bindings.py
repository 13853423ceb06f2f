"""ctypes declarations (argtypes/restype) for every function of include/v6d.h
and include/v6d_internal.h (the uninstalled header of this package's fast
path), and the flag bits. tests/python/test_abi_contract.py checks them
against the headers."""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_int32, c_int64, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p

# The public ABI this package needs at least (V6D_ABI_VERSION of v6d.h), and
# the internal header's version it was written for, which the library must
# match exactly (V6D_INTERNAL_VERSION of v6d_internal.h: no stability promise).
ABI_VERSION = 8
INTERNAL_VERSION = 1

# Flag bits (include/v6d.h; tests/python/test_abi_contract.py checks them).
# Flags of v6d_get_buffers:
GET_UNSAFE = 1  # allow unsealed blobs
# Flags of v6d_delete:
DELETE_FORCE = 1  # also delete every object that uses these
DELETE_SHALLOW = 2  # keep non-blob members (upstream deep=False)
DELETE_MEMORY_TRIM = 4  # return freed pages to the kernel
# Flags of v6d_put_arrow_array (RECORD_BATCH) and v6d_put_arrow_stream (CHUNKED):
ARROW_RECORD_BATCH = 1
ARROW_CHUNKED = 2


class V6DError(ctypes.Structure):
    """``v6d_error``: the caller-owned error out-parameter."""

    _fields_ = [("code", c_int32), ("message", c_void_p)]


class V6DForkedBlob(ctypes.Structure):
    """``v6d_forked_blob``: one blob of an object v6d_forked_get returned."""

    _fields_ = [("id", c_uint64), ("data", c_void_p), ("size", c_uint64)]


class V6DGetArgs(ctypes.Structure):
    """``v6d_get_args`` (v6d_internal.h): v6d_get_object_args's arguments, every field a word
    of 8 bytes (``_session._Room`` reads and writes them by index)."""

    _fields_ = [
        ("id", c_uint64),
        ("flags", c_uint32),
        ("reserved", c_uint32),
        ("json", c_void_p),
        ("cap", c_size_t),
        ("len", c_size_t),
        ("max_blobs", c_size_t),
        ("blob_ids", POINTER(c_uint64)),
        ("datas", POINTER(c_void_p)),
        ("sizes", POINTER(c_uint64)),
        ("n_blobs", c_size_t),
        ("shape", c_uint64),
        ("err", V6DError),
    ]


_client = c_uint64
_err = POINTER(V6DError)
_u8p = POINTER(c_uint8)
_charpp = POINTER(c_void_p)  # char ** out-parameters, freed with v6d_free
_sizep = POINTER(c_size_t)

# name: (restype, argtypes)
SIGNATURES = {
    "v6d_abi_version": (c_int32, []),
    "v6d_internal_version": (c_int32, []),
    "v6d_version": (c_char_p, []),
    "v6d_status_name": (c_char_p, [c_int32]),
    "v6d_error_release": (None, [_err]),
    "v6d_free": (None, [c_void_p]),
    "v6d_open_handles": (c_int64, []),
    "v6d_connect": (c_int32, [c_char_p, POINTER(c_uint64), _err]),
    "v6d_connect_rpc": (c_int32, [c_char_p, c_char_p, POINTER(c_uint64), _err]),
    "v6d_is_rpc": (c_int32, [_client]),
    "v6d_disconnect": (c_int32, [_client, _err]),
    "v6d_connected": (c_int32, [_client]),
    "v6d_set_timeout": (c_int32, [_client, c_int64, _err]),
    "v6d_get_timeout": (c_int32, [_client, POINTER(c_int64), _err]),
    "v6d_instance_id": (c_int32, [_client, POINTER(c_uint64), _err]),
    "v6d_instance_status": (c_int32, [_client, _charpp, _sizep, _err]),
    "v6d_cluster_meta": (c_int32, [_client, _charpp, _sizep, _err]),
    "v6d_create_buffer": (c_int32, [_client, c_uint64, POINTER(c_uint64), POINTER(c_void_p), _err]),
    "v6d_create_buffers": (c_int32, [_client, c_size_t, POINTER(c_uint64), POINTER(c_uint64), POINTER(_u8p), _err]),
    "v6d_seal": (c_int32, [_client, c_uint64, _err]),
    "v6d_abort": (c_int32, [_client, c_uint64, _err]),
    "v6d_shrink": (c_int32, [_client, c_uint64, c_uint64, _err]),
    "v6d_get": (c_int32, [_client, c_uint64, POINTER(_u8p), POINTER(c_uint64), _err]),
    "v6d_get_buffers": (c_int32, [_client, c_size_t, POINTER(c_uint64), c_uint32, POINTER(_u8p), POINTER(c_uint64), _err]),
    "v6d_release": (c_int32, [_client, c_uint64, _err]),
    "v6d_release_queue": (c_int32, [_client, POINTER(c_uint64), c_size_t, _err]),
    "v6d_release_queue_flush": (c_int32, [_client, _err]),
    "v6d_map_private": (c_int32, [_client, c_uint64, POINTER(_u8p), POINTER(c_uint64), _err]),
    "v6d_unmap_private": (c_int32, [c_void_p, _err]),
    "v6d_private_views": (c_int64, []),
    "v6d_pretouch": (c_int32, [c_void_p, c_uint64, _err]),
    "v6d_create_metadata": (
        c_int32,
        [_client, c_char_p, c_size_t, POINTER(c_uint64), c_size_t, POINTER(c_uint64), _charpp, _sizep, _err],
    ),
    "v6d_put_inline": (
        c_int32,
        [_client, c_char_p, c_size_t, c_size_t, POINTER(c_void_p), POINTER(c_uint64), POINTER(c_uint64),
         POINTER(c_uint64), _err],
    ),
    "v6d_get_metadata": (c_int32, [_client, c_uint64, _charpp, _sizep, _err]),
    "v6d_get_object": (c_int32, [_client, c_uint64, c_uint32, _charpp, _sizep, _err]),
    "v6d_blob_pointer": (c_int32, [_client, c_uint64, POINTER(c_void_p), POINTER(c_uint64), POINTER(c_int32), _err]),
    "v6d_get_object_into": (
        c_int32,
        [_client, c_uint64, c_uint32, c_void_p, c_size_t, _sizep, c_size_t, POINTER(c_uint64), POINTER(c_void_p),
         POINTER(c_uint64), _sizep, _err],
    ),
    "v6d_get_object_shaped": (
        c_int32,
        [_client, c_uint64, c_uint32, c_void_p, c_size_t, _sizep, c_size_t, POINTER(c_uint64), POINTER(c_void_p),
         POINTER(c_uint64), _sizep, POINTER(c_uint64), _err],
    ),
    "v6d_get_object_args": (c_int32, [_client, POINTER(V6DGetArgs)]),
    "v6d_list": (c_int32, [_client, c_char_p, c_int32, c_uint64, _charpp, _sizep, _err]),
    "v6d_delete": (c_int32, [_client, c_size_t, POINTER(c_uint64), c_uint32, _err]),
    "v6d_exists": (c_int32, [_client, c_uint64, POINTER(c_int32), _err]),
    "v6d_persist": (c_int32, [_client, c_uint64, _err]),
    "v6d_if_persist": (c_int32, [_client, c_uint64, POINTER(c_int32), _err]),
    "v6d_shallow_copy": (c_int32, [_client, c_uint64, c_char_p, POINTER(c_uint64), _err]),
    "v6d_migrate": (c_int32, [_client, c_uint64, POINTER(c_uint64), _err]),
    "v6d_label": (c_int32, [_client, c_uint64, c_char_p, c_char_p, _err]),
    "v6d_put_name": (c_int32, [_client, c_uint64, c_char_p, _err]),
    "v6d_get_name": (c_int32, [_client, c_char_p, c_int32, c_int64, POINTER(c_uint64), _err]),
    "v6d_drop_name": (c_int32, [_client, c_char_p, _err]),
    "v6d_list_names": (c_int32, [_client, c_char_p, c_int32, c_uint64, _charpp, _sizep, _err]),
    "v6d_clear": (c_int32, [_client, _err]),
    "v6d_memory_trim": (c_int32, [_client, POINTER(c_int32), _err]),
    "v6d_evict": (c_int32, [_client, c_size_t, POINTER(c_uint64), _err]),
    "v6d_load": (c_int32, [_client, c_size_t, POINTER(c_uint64), c_int32, _err]),
    "v6d_unpin": (c_int32, [_client, c_size_t, POINTER(c_uint64), _err]),
    # Arrow C data interface: struct pointers as c_void_p (vineyard.data.arrow mirrors them).
    "v6d_put_arrow_array": (c_int32, [_client, c_void_p, c_void_p, c_uint32, c_char_p, POINTER(c_uint64), _err]),
    "v6d_put_arrow_stream": (c_int32, [_client, c_void_p, c_uint32, c_char_p, POINTER(c_uint64), _err]),
    "v6d_get_arrow_array": (c_int32, [_client, c_uint64, c_void_p, c_void_p, _err]),
    "v6d_get_arrow_stream": (c_int32, [_client, c_uint64, c_void_p, _err]),
    "v6d_arrow_array_from_meta": (c_int32, [_client, c_char_p, c_size_t, c_void_p, c_void_p, _err]),
    "v6d_arrow_stream_from_meta": (c_int32, [_client, c_char_p, c_size_t, c_void_p, _err]),
    "v6d_is_shared_memory": (c_int32, [_client, c_void_p, POINTER(c_int32), _err]),
    "v6d_arrow_exports": (c_int64, []),
    # Streams (ABI 8).
    "v6d_create_stream": (c_int32, [_client, c_uint64, c_int32, c_int32, _err]),
    "v6d_open_stream": (c_int32, [_client, c_uint64, c_int32, _err]),
    "v6d_push_chunk": (c_int32, [_client, c_uint64, c_uint64, c_int64, _err]),
    "v6d_pull_chunk": (c_int32, [_client, c_uint64, POINTER(c_uint64), _err]),
    "v6d_new_buffer_chunk": (c_int32, [_client, c_uint64, c_uint64, POINTER(c_uint64), POINTER(c_void_p), _err]),
    "v6d_stop_stream": (c_int32, [_client, c_uint64, c_int32, _err]),
    "v6d_drop_stream": (c_int32, [_client, c_uint64, _err]),
    # Gets in a forked child (no Go): the only fallible calls that work there.
    "v6d_forked_get": (
        c_int32,
        [_client, c_uint64, _charpp, _sizep, POINTER(POINTER(V6DForkedBlob)), _sizep, POINTER(c_uint64), _err],
    ),
    "v6d_forked_release": (c_int32, [_client, c_uint64, c_uint64, _err]),
}


# The functions of SIGNATURES that include/v6d_internal.h declares (the rest
# are v6d.h's).
INTERNAL = frozenset({
    "v6d_internal_version", "v6d_pretouch", "v6d_get_object_into", "v6d_get_object_shaped", "v6d_get_object_args",
    "v6d_release_queue", "v6d_release_queue_flush",
})


def declare(lib: ctypes.CDLL) -> None:
    """Sets restype/argtypes of every v6d.h function on ``lib``."""
    for name, (restype, argtypes) in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes

