"""Labels, names and other small Python values in metadata fields, exactly.

A value that JSON represents exactly — ``None``, ``bool``, ``int``, a finite
``float``, ``str`` — is stored as itself; anything else (a tuple, a NaN, a
Timestamp, a NumPy scalar, a dict of attrs) as ``{"pickle": "<base64 of pickle
protocol 5>"}``. Plain values never decode to a dict, so the tag is
unambiguous. A field holds the JSON text of the encoded value, as upstream
stores an index's ``name`` (``"\\"a\\""`` for ``"a"``), so upstream readers
see plain names as they expect.
"""

from __future__ import annotations

import base64
import json
import math
import pickle
from typing import Any

__all__ = ["decode", "decode_field", "encode", "encode_field", "is_plain"]

_PLAIN = (type(None), bool, int, float, str)


def is_plain(value: Any) -> bool:
    """True if JSON stores ``value`` exactly (its type included)."""
    return type(value) in _PLAIN and not (type(value) is float and not math.isfinite(value))


def encode(value: Any) -> Any:
    """A JSON value that :func:`decode` turns back into ``value``."""
    if is_plain(value):
        return value
    return {"pickle": base64.b64encode(pickle.dumps(value, protocol=5)).decode("ascii")}


def decode(value: Any) -> Any:
    if isinstance(value, dict):
        return pickle.loads(base64.b64decode(value["pickle"]))
    return value


def encode_field(value: Any) -> str:
    """The JSON text of :func:`encode` (``value``), for a metadata field."""
    return json.dumps(encode(value))


def decode_field(text: Any) -> Any:
    return decode(json.loads(text))
