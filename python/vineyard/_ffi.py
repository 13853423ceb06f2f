"""Finds and loads libv6d.so, lazily, and guards it against ``fork()``.

The library is loaded on the first :func:`lib` call (the first ``connect``),
never at ``import vineyard``: the Go runtime inside it starts threads as soon
as it is loaded and does not survive ``fork()``, so a parent or forkserver
that only imported vineyard stays safe to fork.

The process is recorded at load: a page the kernel zeroes in a forked child
(``MADV_WIPEONFORK``), read without a system call, and the process id where
that page cannot be had. Every entry point that calls into Go goes
through :func:`lib` (or :func:`check_process`), which raises
:class:`~vineyard.errors.ForkError` in a forked child instead of letting the
call hang. Hooks registered with :func:`on_fork` run in such a child
(``os.register_at_fork``).

Lookup order: the environment variable ``V6D_LIBRARY``; ``libv6d.so`` next to
this file (installed packages, ``pip install -e``); ``build/libv6d.so`` of the
source checkout this file lives in (running from a clone with
``PYTHONPATH=python``).
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import threading
from typing import Any, Callable

from . import _bindings
from ._bindings import V6DError
from .errors import ForkError, VineyardException, exception_for

__all__ = ["call", "check_process", "forked_call", "forked_child", "forked_free", "forked_refusal", "function", "lib", "library_path",
           "loaded", "on_fork", "raise_status", "take_string", "untyped", "usable"]

LIBRARY_ENV = "V6D_LIBRARY"
_LIBRARY_NAME = "libv6d.so"

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_pid: int | None = None  # pid of the process that loaded the library
_forked = False  # set in a child forked after loading
# 1 in the process that loaded the library, 0 in a child forked from it (the
# kernel wipes it), also one forked without Python's fork hooks; None where
# MADV_WIPEONFORK is missing (then the process id is compared: a system call).
_sentinel: mmap.mmap | None = None
_fork_hooks: list[Callable[[], None]] = []


def _candidates() -> list[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    env = os.environ.get(LIBRARY_ENV)
    if env:
        return [env]
    found.append(os.path.join(here, _LIBRARY_NAME))
    # A source checkout: <repo>/python/vineyard/_ffi.py -> <repo>/build/libv6d.so
    repo = os.path.dirname(os.path.dirname(here))
    if os.path.isfile(os.path.join(repo, "include", "v6d.h")):
        found.append(os.path.join(repo, "build", _LIBRARY_NAME))
    return found


def library_path() -> str:
    """Returns the path of the libv6d.so that :func:`lib` loads.

    Raises FileNotFoundError naming every place looked at.
    """
    tried = _candidates()
    for path in tried:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        "vineyard: libv6d.so not found (tried {}); set {}, or build it with "
        "'make build' / 'pip install .'".format(", ".join(tried), LIBRARY_ENV)
    )


def _fork_message() -> str:
    return (
        f"vineyard: libv6d was loaded in process {_pid or -1} and this process ({os.getpid()}) is a "
        "fork() of it; the Go runtime inside libv6d does not survive fork(), "
        "so a client cannot be used (or created) here. Start worker processes "
        "with the 'spawn' or 'forkserver' multiprocessing start method "
        "(multiprocessing.get_context('spawn')), or connect only in the child "
        "without connecting in the parent before forking; pass objects "
        "between processes by ObjectID. Only client.get works here, for "
        "objects the daemon published in its directory, read-only and "
        "without Go (docs/integrations.md, 'Reading in forked children')."
    )


def _fork_sentinel() -> mmap.mmap | None:
    """A page holding 1 that reads 0 in a forked child, or None where the
    kernel cannot wipe pages on fork (Linux before 4.14, other systems)."""
    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # wiping needs private
        page.madvise(getattr(mmap, "MADV_WIPEONFORK", 18))  # 18: Linux's value
    except (OSError, ValueError, AttributeError):
        return None
    page[0] = 1
    return page


def check_process() -> None:
    """Raises ForkError if the library was loaded by another (parent) process."""
    if _lib is not None and not usable():
        raise ForkError(_fork_message())


def forked_child() -> bool:
    """Reports whether this is a child forked after the library loaded: no
    call enters libv6d's Go here, only :func:`forked_call`'s."""
    return _lib is not None and not usable()


def forked_refusal(what: str) -> ForkError:
    """The ForkError of a get in a forked child whose value needs libv6d's
    Go side (``what``: a torch tensor's private view, an Arrow export)."""
    return ForkError(
        f"vineyard: {what} needs libv6d's Go runtime, which this process ({os.getpid()}), a fork() of "
        f"process {_pid or -1} that loaded libv6d, does not have. A get in a forked child works for values "
        "made without it (NumPy arrays, DataFrames of NumPy columns, pickled values, blobs). Get the value in "
        "the parent before forking (the child inherits it), or start workers with the 'spawn' or 'forkserver' "
        "start method and connect there.")


def forked_call(name: str, *args: Any) -> None:
    """:func:`call` for the functions that work in a forked child without Go
    (``v6d_forked_get``, ``v6d_forked_release``; v6d.h, "Reading in a
    forked child"), past the fork guard."""
    if not name.startswith("v6d_forked_") or _lib is None:
        raise ValueError(f"vineyard: {name} is not a function for forked children, or libv6d is not loaded")
    err = V6DError()
    status = getattr(_lib, name)(*args, _byref(err))
    if status != 0:
        message = ctypes.string_at(err.message).decode("utf-8", "replace") if err.message else ""
        _lib.v6d_error_release(_byref(err))
        raise exception_for(status, message)


def forked_free(ptr: int) -> None:
    """``v6d_free`` (C's free, no Go), also in a forked child."""
    if _lib is not None and ptr:
        _lib.v6d_free(ptr)


def loaded() -> bool:
    """Reports whether libv6d has been loaded (in this or a parent process)."""
    return _lib is not None


def usable() -> bool:
    """Reports whether calls into libv6d are safe here: the library is loaded,
    by this process (not a parent this one was forked from)."""
    if _lib is None or _forked:
        return False
    page = _sentinel
    if page is not None:
        return page[0] == 1
    return os.getpid() == _pid


def lib() -> ctypes.CDLL:
    """Returns the loaded library, loading it on first use.

    Raises ForkError in a child forked after the library was loaded, and
    FileNotFoundError / VineyardException if it cannot be loaded.
    """
    loaded_lib = _lib
    if loaded_lib is not None:
        if not usable():
            raise ForkError(_fork_message())
        return loaded_lib
    return _load()


def _load() -> ctypes.CDLL:
    global _lib, _pid, _sentinel
    with _lock:
        if _lib is not None:
            return lib()
        path = library_path()
        try:
            # CDLL (not PyDLL): every call releases the GIL, so a call that
            # blocks on the daemon never stalls the other Python threads.
            handle = ctypes.CDLL(path)
        except OSError as e:
            raise VineyardException(f"vineyard: cannot load {path}: {e}") from e
        # The public ABI may be newer (it only adds); the internal header's
        # functions must be exactly those this package was written for.
        version = handle.v6d_abi_version()
        internal = handle.v6d_internal_version() if hasattr(handle, "v6d_internal_version") else 0
        if version < _bindings.ABI_VERSION or internal != _bindings.INTERNAL_VERSION:
            raise VineyardException(
                f"vineyard: {path} implements C ABI version {version} (internal {internal}), this package needs "
                f"{_bindings.ABI_VERSION} or later (internal exactly {_bindings.INTERNAL_VERSION}): a libv6d.so "
                "built from another release; set V6D_LIBRARY to the one built with this package"
            )
        _bindings.declare(handle)
        _pid = os.getpid()
        _sentinel = _fork_sentinel()
        _lib = handle
        return handle


def on_fork(hook: Callable[[], None]) -> None:
    """Registers ``hook`` to run in a child forked after the library loaded."""
    _fork_hooks.append(hook)


def _after_fork_in_child() -> None:
    global _forked
    if _lib is None:
        return  # nothing Go ever ran in the parent: the child may load afresh
    _forked = True
    for hook in _fork_hooks:
        with contextlib.suppress(Exception):  # a hook must never break fork()
            hook()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# -- the one choke point of calls into libv6d ------------------------------

_fns: dict[str, Any] = {}  # name -> bound library function, filled on first use
_byref = ctypes.byref


def function(name: str) -> Any:
    """The library function ``name`` (loading the library on first use)."""
    fn = _fns.get(name)
    if fn is None:
        fn = _fns[name] = getattr(lib(), name)
    return fn


_untyped: dict[str, Any] = {}


def untyped(name: str) -> Any:
    """The library function ``name`` without argument types, returning its
    int32 status: ctypes converts no argument, which saves ~0.5 µs per call
    of a get's two, so the caller must pass ctypes objects of exactly the C
    types of v6d.h (``c_uint64`` for a client and an id, ...). For the hot
    path of a get only; everything else goes through :func:`function`."""
    fn = _untyped.get(name)
    if fn is None:
        fn = lib()[name]  # a new function object: the declared one keeps its argtypes
        fn.restype = ctypes.c_int32
        _untyped[name] = fn
    return fn


def call(name: str, *args: Any) -> None:
    """Calls the fallible v6d function ``name`` with ``args`` and a fresh
    ``v6d_error`` out-parameter, and raises its status as the exception
    :func:`vineyard.errors.exception_for` maps it to. The fork guard is the
    caller's: handles come from ``Session.handle()``, which checks first (and
    in a forked child libv6d itself answers V6D_FORKED, i.e. ForkError,
    without entering Go)."""
    err = V6DError()
    status = (_fns.get(name) or function(name))(*args, _byref(err))
    if status != 0:
        message = ctypes.string_at(err.message).decode("utf-8", "replace") if err.message else ""
        function("v6d_error_release")(_byref(err))
        raise exception_for(status, message)


def raise_status(status: int, err: V6DError) -> None:
    """Raises the exception of a failed call's ``status`` with the message
    in ``err`` (its out-parameter), which it releases and clears so that
    ``err`` can be passed again."""
    message = ctypes.string_at(err.message).decode("utf-8", "replace") if err.message else ""
    function("v6d_error_release")(_byref(err))
    err.code, err.message = 0, None
    raise exception_for(status, message)


def call_retrying(name: str, *args: Any) -> None:
    """:func:`call` for local lookups, whose failure changes nothing and
    needs no daemon (``v6d_blob_pointer``): the first call passes no
    ``v6d_error`` (a third of a fast call's cost in ctypes); only a failure
    is made again with one, to raise its message. Not for calls that talk
    to the daemon: a timeout loses the connection, and the retry would then
    report that instead."""
    if (_fns.get(name) or function(name))(*args, None) != 0:
        call(name, *args)


def take_string(p: ctypes.c_void_p, n: ctypes.c_size_t) -> bytes:
    """Copies and frees (``v6d_free``) a string the library allocated."""
    if not p.value:
        return b""
    try:
        return ctypes.string_at(p.value, n.value)
    finally:
        function("v6d_free")(p)
