"""Status codes and exceptions: the one status → exception mapping.

Every failing call into libv6d returns a status from ``include/v6d.h``; this
module turns it into an exception. :class:`VineyardException` is the base
(a :class:`RuntimeError`, as upstream Vineyard's), and every status code has
one subclass named as upstream names it (``ObjectNotExistsException``,
``NotEnoughMemoryException``, ...), plus three of ours for the library's own
codes (:class:`InvalidHandleException`, :class:`TimeoutException`,
:class:`InternalException`).

>>> exc = exception_for(Status.OBJECT_NOT_EXISTS, "no such object")
>>> type(exc).__name__, exc.code, str(exc)
('ObjectNotExistsException', 12, 'no such object')
>>> isinstance(exception_for(Status.CONNECTION_FAILED, "x"), ConnectionError)
True
"""

from __future__ import annotations

import enum
from typing import TypeVar

__all__ = [
    "AlreadyStoppedException",
    "ArrowErrorException",
    "AssertionFailedException",
    "ConnectionErrorException",
    "ConnectionFailedException",
    "EndOfFileException",
    "EtcdErrorException",
    "ForkError",
    "GlobalObjectInvalidException",
    "IOErrorException",
    "InternalException",
    "InvalidException",
    "InvalidHandleException",
    "InvalidStreamStateException",
    "KeyErrorException",
    "MetaTreeInvalidException",
    "MetaTreeLinkInvalidException",
    "MetaTreeNameInvalidException",
    "MetaTreeNameNotExistsException",
    "MetaTreeSubtreeNotExistsException",
    "MetaTreeTypeInvalidException",
    "MetaTreeTypeNotExistsException",
    "NotEnoughMemoryException",
    "NotImplementedException",
    "ObjectExistsException",
    "ObjectIsBlobException",
    "ObjectNotExistsException",
    "ObjectNotSealedException",
    "ObjectNotSpilledException",
    "ObjectSealedException",
    "ObjectSpilledException",
    "ObjectTypeErrorException",
    "RedisErrorException",
    "Status",
    "StreamDrainedException",
    "StreamFailedException",
    "StreamOpenedException",
    "TimeoutException",
    "TypeErrorException",
    "UnknownErrorException",
    "UserInputErrorException",
    "VineyardException",
    "VineyardServerNotReadyException",
    "exception_for",
]


class Status(enum.IntEnum):
    """Mirror of ``v6d_status`` in include/v6d.h (upstream codes, then ours)."""

    OK = 0
    INVALID = 1
    KEY_ERROR = 2
    TYPE_ERROR = 3
    IO_ERROR = 4
    END_OF_FILE = 5
    NOT_IMPLEMENTED = 6
    ASSERTION_FAILED = 7
    USER_INPUT_ERROR = 8
    OBJECT_EXISTS = 11
    OBJECT_NOT_EXISTS = 12
    OBJECT_SEALED = 13
    OBJECT_NOT_SEALED = 14
    OBJECT_IS_BLOB = 15
    OBJECT_TYPE_ERROR = 16
    OBJECT_SPILLED = 17
    OBJECT_NOT_SPILLED = 18
    META_TREE_INVALID = 21
    META_TREE_TYPE_INVALID = 22
    META_TREE_TYPE_NOT_EXISTS = 23
    META_TREE_NAME_INVALID = 24
    META_TREE_NAME_NOT_EXISTS = 25
    META_TREE_LINK_INVALID = 26
    META_TREE_SUBTREE_NOT_EXISTS = 27
    SERVER_NOT_READY = 31
    ARROW_ERROR = 32
    CONNECTION_FAILED = 33
    CONNECTION_ERROR = 34
    ETCD_ERROR = 35
    ALREADY_STOPPED = 36
    REDIS_ERROR = 37
    NOT_ENOUGH_MEMORY = 41
    STREAM_DRAINED = 42
    STREAM_FAILED = 43
    INVALID_STREAM_STATE = 44
    STREAM_OPENED = 45
    GLOBAL_OBJECT_INVALID = 51
    UNKNOWN_ERROR = 255
    INVALID_HANDLE = 1000
    TIMEOUT = 1001
    INTERNAL = 1002
    FORKED = 1003


class VineyardException(RuntimeError):
    """Base of every error a vineyard call raises; ``code`` is its status."""

    code: int = Status.UNKNOWN_ERROR

    def __init__(self, message: str = "", code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = int(code)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={int(self.code)})"

    def __reduce__(self) -> tuple:
        return (type(self), (self.message, int(self.code)))


_E = TypeVar("_E", bound="VineyardException")

_BY_CODE: dict[int, type[VineyardException]] = {}


def _register(cls: type[_E]) -> type[_E]:
    _BY_CODE[int(cls.code)] = cls
    return cls


@_register
class InvalidException(VineyardException):
    """Status ``INVALID``."""

    code = Status.INVALID


@_register
class KeyErrorException(VineyardException):
    """Status ``KEY_ERROR``."""

    code = Status.KEY_ERROR


@_register
class TypeErrorException(VineyardException):
    """Status ``TYPE_ERROR``."""

    code = Status.TYPE_ERROR


@_register
class IOErrorException(VineyardException):
    """Status ``IO_ERROR``."""

    code = Status.IO_ERROR


@_register
class EndOfFileException(VineyardException):
    """Status ``END_OF_FILE``."""

    code = Status.END_OF_FILE


@_register
class NotImplementedException(VineyardException):
    """Status ``NOT_IMPLEMENTED``."""

    code = Status.NOT_IMPLEMENTED


@_register
class AssertionFailedException(VineyardException):
    """Status ``ASSERTION_FAILED``."""

    code = Status.ASSERTION_FAILED


@_register
class UserInputErrorException(VineyardException):
    """Status ``USER_INPUT_ERROR``."""

    code = Status.USER_INPUT_ERROR


@_register
class ObjectExistsException(VineyardException):
    """Status ``OBJECT_EXISTS``."""

    code = Status.OBJECT_EXISTS


@_register
class ObjectNotExistsException(VineyardException):
    """Status ``OBJECT_NOT_EXISTS``."""

    code = Status.OBJECT_NOT_EXISTS


@_register
class ObjectSealedException(VineyardException):
    """Status ``OBJECT_SEALED``."""

    code = Status.OBJECT_SEALED


@_register
class ObjectNotSealedException(VineyardException):
    """Status ``OBJECT_NOT_SEALED``."""

    code = Status.OBJECT_NOT_SEALED


@_register
class ObjectIsBlobException(VineyardException):
    """Status ``OBJECT_IS_BLOB``."""

    code = Status.OBJECT_IS_BLOB


@_register
class ObjectTypeErrorException(VineyardException):
    """Status ``OBJECT_TYPE_ERROR``."""

    code = Status.OBJECT_TYPE_ERROR


@_register
class ObjectSpilledException(VineyardException):
    """Status ``OBJECT_SPILLED``."""

    code = Status.OBJECT_SPILLED


@_register
class ObjectNotSpilledException(VineyardException):
    """Status ``OBJECT_NOT_SPILLED``."""

    code = Status.OBJECT_NOT_SPILLED


@_register
class MetaTreeInvalidException(VineyardException):
    """Status ``META_TREE_INVALID``."""

    code = Status.META_TREE_INVALID


@_register
class MetaTreeTypeInvalidException(VineyardException):
    """Status ``META_TREE_TYPE_INVALID``."""

    code = Status.META_TREE_TYPE_INVALID


@_register
class MetaTreeTypeNotExistsException(VineyardException):
    """Status ``META_TREE_TYPE_NOT_EXISTS``."""

    code = Status.META_TREE_TYPE_NOT_EXISTS


@_register
class MetaTreeNameInvalidException(VineyardException):
    """Status ``META_TREE_NAME_INVALID``."""

    code = Status.META_TREE_NAME_INVALID


@_register
class MetaTreeNameNotExistsException(VineyardException):
    """Status ``META_TREE_NAME_NOT_EXISTS``."""

    code = Status.META_TREE_NAME_NOT_EXISTS


@_register
class MetaTreeLinkInvalidException(VineyardException):
    """Status ``META_TREE_LINK_INVALID``."""

    code = Status.META_TREE_LINK_INVALID


@_register
class MetaTreeSubtreeNotExistsException(VineyardException):
    """Status ``META_TREE_SUBTREE_NOT_EXISTS``."""

    code = Status.META_TREE_SUBTREE_NOT_EXISTS


@_register
class VineyardServerNotReadyException(VineyardException):
    """Status ``SERVER_NOT_READY``."""

    code = Status.SERVER_NOT_READY


@_register
class ArrowErrorException(VineyardException):
    """Status ``ARROW_ERROR``."""

    code = Status.ARROW_ERROR


@_register
class ConnectionFailedException(VineyardException, ConnectionError):
    """Connecting to the daemon failed; also a builtin ConnectionError."""

    code = Status.CONNECTION_FAILED


@_register
class ConnectionErrorException(VineyardException, ConnectionError):
    """The connection to the daemon broke; also a builtin ConnectionError."""

    code = Status.CONNECTION_ERROR


@_register
class EtcdErrorException(VineyardException):
    """Status ``ETCD_ERROR``."""

    code = Status.ETCD_ERROR


@_register
class AlreadyStoppedException(VineyardException):
    """Status ``ALREADY_STOPPED``."""

    code = Status.ALREADY_STOPPED


@_register
class RedisErrorException(VineyardException):
    """Status ``REDIS_ERROR``."""

    code = Status.REDIS_ERROR


@_register
class NotEnoughMemoryException(VineyardException):
    """The daemon's memory (--size) cannot hold the request."""

    code = Status.NOT_ENOUGH_MEMORY


@_register
class StreamDrainedException(VineyardException):
    """Status ``STREAM_DRAINED``."""

    code = Status.STREAM_DRAINED


@_register
class StreamFailedException(VineyardException):
    """Status ``STREAM_FAILED``."""

    code = Status.STREAM_FAILED


@_register
class InvalidStreamStateException(VineyardException):
    """Status ``INVALID_STREAM_STATE``."""

    code = Status.INVALID_STREAM_STATE


@_register
class StreamOpenedException(VineyardException):
    """Status ``STREAM_OPENED``."""

    code = Status.STREAM_OPENED


@_register
class GlobalObjectInvalidException(VineyardException):
    """Status ``GLOBAL_OBJECT_INVALID``."""

    code = Status.GLOBAL_OBJECT_INVALID


@_register
class UnknownErrorException(VineyardException):
    """Status ``UNKNOWN_ERROR``."""

    code = Status.UNKNOWN_ERROR


@_register
class InvalidHandleException(VineyardException):
    """The client is closed, or its handle was never valid (ours)."""

    code = Status.INVALID_HANDLE


@_register
class TimeoutException(VineyardException, TimeoutError):
    """A blocking call gave up after its timeout; also a builtin TimeoutError (ours)."""

    code = Status.TIMEOUT


@_register
class InternalException(VineyardException):
    """libv6d caught an internal fault and refuses further calls (ours)."""

    code = Status.INTERNAL


@_register
class ForkError(InvalidHandleException):
    """libv6d was loaded before ``fork()``; this child cannot call into it
    (status ``FORKED``, ours).

    The Go runtime inside libv6d does not survive ``fork()``: a forked child
    that called into it would hang. ``vineyard.connect()`` and every client
    method raise this instead, at once. Start workers with the ``'spawn'`` or
    ``'forkserver'`` multiprocessing start method (or only connect in the
    child, never in the parent before forking), and pass objects by id.
    """

    code = Status.FORKED


def exception_for(code: int, message: str = "") -> VineyardException:
    """Returns the exception for status ``code`` carrying ``message``."""
    cls = _BY_CODE.get(int(code))
    if cls is None:
        return UnknownErrorException(message or f"unknown status {int(code)}", code)
    return cls(message or _status_text(code))


def _status_text(code: int) -> str:
    try:
        return Status(code).name
    except ValueError:
        return f"status {int(code)}"
