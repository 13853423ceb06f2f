"""ObjectID and ObjectMeta, with upstream Vineyard's shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self


__all__ = ["BLOB_TYPENAME", "ObjectID", "ObjectMeta"]

BLOB_TYPENAME = "vineyard::Blob"


class ObjectID(int):
    """A 64-bit object id; bit 63 marks a blob. ``repr`` is ``o%016x`` and
    ``str`` is upstream's ``ObjectID <"o%016x">``.

    Made from an int, or from text in any of the forms ids are printed in:
    ``repr`` (``"o000000000000002a"``), ``str`` (``'ObjectID <"o…">'``), or
    decimal (``"42"``); so ``ObjectID(str(oid)) == ObjectID(repr(oid)) == oid``.

    >>> ObjectID("o000000000000002a") == 42
    True
    >>> ObjectID(str(ObjectID(42))) == ObjectID(repr(ObjectID(42))) == 42
    True
    >>> repr(ObjectID(42))
    'o000000000000002a'
    """

    def __new__(cls, value: int | str | ObjectID = 0xFFFFFFFFFFFFFFFF) -> Self:
        if isinstance(value, str):
            value = _parse_id(value)
        elif not isinstance(value, int) and isinstance(getattr(value, "id", None), int):
            value = value.id  # a Blob, Object or ObjectMeta stands for its id, as upstream's
        value = int(value)
        if not 0 <= value < 1 << 64:
            raise ValueError(f"object id {value} is out of range")
        return super().__new__(cls, value)

    def __repr__(self) -> str:
        return f"o{int(self):016x}"

    def __str__(self) -> str:
        return f'ObjectID <"{self!r}">'

    def __reduce__(self) -> tuple:
        return (ObjectID, (int(self),))

    @property
    def is_blob(self) -> bool:
        """True for blob ids (bit 63 set)."""
        return bool(int(self) >> 63) and int(self) != 0xFFFFFFFFFFFFFFFF

    @property
    def uri(self) -> str:
        return f"vineyard://{self!r}"


def _parse_id(text: str) -> int:
    """The id in ``text``: ``o`` and 1-16 hex digits, the same wrapped as
    ``ObjectID <"o…">``, or decimal digits."""
    body = text.strip()
    if body.startswith('ObjectID <"') and body.endswith('">'):
        body = body[len('ObjectID <"'):-2]
    if body[:1] == "o" and 1 < len(body) <= 17 and all(c in _HEX for c in body[1:]):
        return int(body[1:], 16)
    if body.isascii() and body.isdigit():
        return int(body)
    raise ValueError(f"invalid object id {text!r}: expected 'o' and up to 16 hex digits ('o000000000000002a'), "
                     f"the same as ObjectID <\"o…\"> (str of an ObjectID), or a decimal number")


_HEX = frozenset("0123456789abcdefABCDEF")


class ObjectMeta:
    """A metadata tree: a dict-like view with ``typename``, ``id``, members.

    Lists and dicts assigned into it are stored as JSON strings, as upstream
    does; members are nested ObjectMeta.
    """

    def __init__(self, tree: dict[str, Any] | None = None, global_: bool = False) -> None:
        self._tree: dict[str, Any] = dict(tree or {})
        self._seal: list[int] = []  # unsealed blobs of ours this tree references
        self._builders: list[Any] = []  # the BlobBuilders among them, told when sealed
        self._inline: list[tuple[dict[str, Any], Any]] = []  # (placeholder, data) of inline blobs
        self._here: int | None = None  # the instance of the client that returned it (islocal)
        if global_:
            self._tree["global"] = True

    @property
    def created(self) -> bool:
        """True once the object exists in the store (the tree has an id); a
        tree being built has none yet."""
        return "id" in self._tree

    @property
    def inline_data(self) -> list[tuple[dict[str, Any], Any]]:
        """The new blobs this tree carries by value (see
        :meth:`add_inline_member`): their placeholder members and data."""
        return self._inline

    def add_inline_member(self, key: str, data: Any, tree: ObjectMeta | None = None) -> None:
        """Adds, as member ``key``, a new blob holding a copy of ``data`` (a
        contiguous NumPy array, copied in memory order, or any bytes-like
        object; kept alive until the tree is created). The bytes travel with
        the tree: the blob and the object are created in one round trip.
        Meant for small data; the client falls back to shared-memory blobs
        when the total grows large. With ``tree`` (a tree embedded in this one
        already), the member goes into ``tree`` and this tree carries it."""
        target = self if tree is None else tree
        if key in target._tree:
            raise KeyError(f"member {key!r} exists already")
        placeholder = {"inline": len(self._inline)}
        target._tree[key] = placeholder
        self._inline.append((placeholder, data))

    def _adopt(self, child: ObjectMeta) -> None:
        """Takes over the blobs a pending child tree brings along."""
        self._seal.extend(child._seal)
        self._builders.extend(child._builders)
        for placeholder, data in child._inline:
            placeholder["inline"] = len(self._inline)
            self._inline.append((placeholder, data))

    def seal_with(self, builder: Any) -> None:
        """Makes creating this tree seal ``builder`` (an unsealed BlobBuilder
        of this client, a member of this tree or of a tree embedded in it)."""
        self._seal.append(int(builder.id))
        self._builders.append(builder)

    @property
    def sealing_builders(self) -> list[Any]:
        """The BlobBuilders among :attr:`seal_ids`: creating the tree seals
        them, so their writable views are revoked first."""
        return self._builders

    @property
    def seal_ids(self) -> list[int]:
        """Unsealed blobs of this client that the tree references as members:
        :meth:`Client.create_metadata` seals them in the same round trip."""
        return self._seal

    @property
    def id(self) -> ObjectID:
        return ObjectID(self._tree.get("id", 0xFFFFFFFFFFFFFFFF))

    @property
    def typename(self) -> str:
        return str(self._tree.get("typename", ""))

    @typename.setter
    def typename(self, value: str) -> None:
        self._tree["typename"] = value

    @property
    def nbytes(self) -> int:
        return int(self._tree.get("nbytes") or 0)

    @nbytes.setter
    def nbytes(self, value: int) -> None:
        self._tree["nbytes"] = int(value)

    @property
    def instance_id(self) -> int:
        return int(self._tree.get("instance_id", 0))

    @property
    def signature(self) -> int:
        return int(self._tree.get("signature", 0))

    @property
    def isglobal(self) -> bool:
        return bool(self._tree.get("global", False))

    @property
    def transient(self) -> bool:
        return bool(self._tree.get("transient", True))

    def set_global(self, global_: bool = True) -> None:
        self._tree["global"] = bool(global_)

    def add_member(self, key: str, value: Any) -> None:
        """Adds a member: an existing object (ObjectID, int, a created
        ObjectMeta, a Blob), a blob being written (a BlobBuilder: sealed when
        this tree is created), or a tree not created yet (an ObjectMeta
        without id: created together with this one)."""
        if key in self._tree:
            raise KeyError(f"member {key!r} exists already")
        if isinstance(value, ObjectMeta):
            self._tree[key] = value._tree
            self._adopt(value)
            return
        if getattr(value, "issealed", True) is False:  # a BlobBuilder
            self.seal_with(value)
            self._tree[key] = {"id": repr(ObjectID(value.id))}
            return
        oid = getattr(value, "id", value)
        self._tree[key] = {"id": repr(ObjectID(oid))}

    def member(self, key: str) -> ObjectMeta:
        value = self._tree[key]
        if not isinstance(value, dict):
            raise KeyError(f"{key!r} is not a member")
        return self._child(value)

    def get_member(self, key: str) -> ObjectMeta:
        """Upstream's name of :meth:`member`."""
        return self.member(key)

    def _blobs(self, tree: dict[str, Any], out: dict[str, int]) -> dict[str, int]:
        """Blob id text -> bytes of every blob in ``tree``, each once."""
        if tree.get("typename") == BLOB_TYPENAME:
            out[str(tree.get("id"))] = int(tree.get("nbytes") or tree.get("length") or 0)
        for value in tree.values():
            if isinstance(value, dict):
                self._blobs(value, out)
        return out

    @property
    def memory_usage(self) -> int:
        """Upstream's: the bytes of the object's blobs (each counted once)."""
        return sum(self._blobs(self._tree, {}).values())

    def memory_usage_details(self, pretty: bool = True) -> dict[str, Any]:
        """Upstream's: the object's memory usage per member, as a tree
        ``{"memory_usage": bytes, member: {...}}``; with ``pretty`` the
        sizes are texts such as ``"1.5 KiB"``."""
        def show(n: int) -> Any:
            if not pretty:
                return n
            size, unit = float(n), "bytes"
            for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
                if size < 1024 or unit == "TiB":
                    break
                size /= 1024
            return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit}"

        def walk(tree: dict[str, Any]) -> dict[str, Any]:
            out: dict[str, Any] = {"memory_usage": show(sum(self._blobs(tree, {}).values()))}
            for key, value in tree.items():
                if isinstance(value, dict) and value.get("typename") != BLOB_TYPENAME:
                    out[key] = walk(value)
            return out

        return walk(self._tree)

    @property
    def timestamp(self) -> int:
        """The tree's ``timestamp`` field, 0 when it has none."""
        return int(self._tree.get("timestamp") or 0)

    @property
    def labels(self) -> dict[str, str]:
        """The object's labels (``client.label``; the tree's ``__labels``)."""
        raw = self._tree.get("__labels")
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError:
                return {}
        return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}

    def label(self, key: str) -> str | None:
        """The label ``key``, or None."""
        return self.labels.get(key)

    def reset_key(self, key: str) -> None:
        """Removes ``key`` from the tree (upstream's), if there."""
        self._tree.pop(key, None)

    def reset_signature(self) -> None:
        """Drops the signature: the tree gets a new one when created."""
        self._tree.pop("signature", None)

    def _child(self, tree: dict[str, Any]) -> ObjectMeta:
        child = ObjectMeta(tree)
        child._here = self._here
        return child

    @property
    def islocal(self) -> bool:
        """Upstream's: True when the object lives on the instance of the
        client that returned this metadata (``get_meta``,
        ``list_metadatas``), False for an object of another instance of the
        cluster and for a global object (its partitions may live anywhere,
        as upstream's says); a tree being built is local."""
        return self._here is None or (self.instance_id == self._here and not self.isglobal)

    def __contains__(self, key: object) -> bool:
        return key in self._tree

    def __getitem__(self, key: str) -> Any:
        value = self._tree[key]
        return self._child(value) if isinstance(value, dict) else value

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._tree else default

    def __setitem__(self, key: str, value: Any) -> None:
        if isinstance(value, ObjectMeta):
            self._tree[key] = value._tree
            self._adopt(value)
        elif isinstance(value, (list, tuple, dict)):
            self._tree[key] = json.dumps(value)
        elif value is None or isinstance(value, (str, bool, int, float)):
            self._tree[key] = value
        else:
            raise TypeError(f"cannot store {type(value).__name__} in ObjectMeta")

    def __iter__(self) -> Iterator[str]:
        return iter(self._tree)

    def items(self) -> Any:
        return [(k, self[k]) for k in self._tree]

    def to_json(self) -> str:
        return json.dumps(self._tree)

    def __repr__(self) -> str:
        return "ObjectMeta " + json.dumps(self._tree, indent=4)

    def __reduce__(self) -> tuple:
        return (ObjectMeta, (self._tree,))
