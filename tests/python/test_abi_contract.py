"""The Python mirrors of the C contract agree with include/v6d.h and
include/v6d_internal.h.

Parses the headers (prototypes, the v6d_status enum, the flag enums, the ABI
and internal versions, struct v6d_error and v6d_get_args) and
internal/status/status.go, and compares them with vineyard._bindings
(restype/argtypes of every function, which are internal, flag constants,
ABI_VERSION, INTERNAL_VERSION, V6DError) and vineyard.errors (Status); and
the status names libv6d/v6d.c answers without Go with Go's. Needs neither
the library nor a daemon: the modules are loaded from their files, so this
test does not depend on the rest of the package.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "include" / "v6d.h"
INTERNAL_HEADER = ROOT / "include" / "v6d_internal.h"
STATUS_GO = ROOT / "internal" / "status" / "status.go"
SHIM_C = ROOT / "libv6d" / "v6d.c"


def _load(name: str) -> ModuleType:
    path = ROOT / "python" / "vineyard" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_abi_contract_{name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses and enums look their module up
    spec.loader.exec_module(mod)
    return mod


bindings = _load("_bindings")
errors = _load("errors")


def _header_code(header: Path | None = None) -> str:
    """The header (default: both) without comments."""
    text = header.read_text() if header else HEADER.read_text() + INTERNAL_HEADER.read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    text = re.sub(r"//[^\n]*", " ", text)
    return text


def _prototypes(header: Path | None = None) -> dict[str, tuple[str, list[str]]]:
    """name -> (return type, [parameter types]) of every v6d_* declaration."""
    code = re.sub(r"#[^\n]*", " ", _header_code(header))  # directives
    protos: dict[str, tuple[str, list[str]]] = {}
    for m in re.finditer(r"([A-Za-z_][\w\s\*]*?)\b(v6d_\w+)\s*\(([^()]*)\)\s*;", code):
        ret, name, params = m.group(1), m.group(2), m.group(3)
        ret = " ".join(ret.split()[-3:])  # the statement before may run into it
        ret = re.sub(r"^.*[;{}]", "", ret).strip()
        types = [] if params.strip() in ("", "void") else [_param_type(p) for p in params.split(",")]
        protos[name] = (_norm(ret), types)
    return protos


def _param_type(param: str) -> str:
    """'const uint8_t **data' -> 'const uint8_t**' (the name dropped)."""
    p = " ".join(param.split())
    p = re.sub(r"\s*\*\s*", "*", p)
    p = re.sub(r"(?<=[\s\*])[A-Za-z_]\w*$", "", p)  # the parameter name
    return _norm(p)


def _norm(t: str) -> str:
    t = " ".join(t.replace("*", " * ").split())
    return t.replace(" *", "*").replace("* ", "*").strip()


_SCALARS: dict[str, Any] = {
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "int": ctypes.c_int,
    "v6d_client": ctypes.c_uint64,
    "v6d_status": ctypes.c_int32,  # an enum of int32 codes (v6d_error.code)
}
_OPAQUE = {"void", "uint8_t", "char", "struct ArrowArray", "struct ArrowSchema", "struct ArrowArrayStream"}
_PTR_LIKE = (ctypes.c_void_p, ctypes.c_char_p)


def _is_pointer_type(t: Any) -> bool:
    return t in _PTR_LIKE or (isinstance(t, type) and issubclass(t, ctypes._Pointer))


def _mismatch(ctype: str, py: Any, *, result: bool = False) -> str | None:
    """Why the ctypes type py cannot carry the C type ctype, or None."""
    base = ctype.replace("const ", "").replace("*const", "*").strip()
    depth = base.count("*")
    base = base.replace("*", "").strip()
    if depth == 0:
        if base == "void":
            return None if py is None else f"void result declared as {py}"
        want = _SCALARS.get(base)
        if want is None:
            return f"unknown C type {ctype!r} (teach this test)"
        return None if py is want else f"{ctype} declared as {py}"
    structs = {"v6d_error": bindings.V6DError, "v6d_get_args": bindings.V6DGetArgs,
               "v6d_forked_blob": bindings.V6DForkedBlob}
    if base in structs and depth == 1:
        ok = isinstance(py, type) and issubclass(py, ctypes._Pointer) and py._type_ is structs[base]
        return None if ok else f"{ctype} declared as {py}"
    if depth == 1:
        if base == "char":
            ok = py is ctypes.c_char_p or (not result and py is ctypes.c_void_p)
            return None if ok else f"{ctype} declared as {py}"
        if base in _OPAQUE:
            ok = py is ctypes.c_void_p or (
                isinstance(py, type)
                and issubclass(py, ctypes._Pointer)
                and py._type_ is ctypes.c_uint8
                and base == "uint8_t"
            )
            return None if ok else f"{ctype} declared as {py}"
        want = _SCALARS.get(base)
        if want is None:
            return f"unknown C type {ctype!r} (teach this test)"
        ok = isinstance(py, type) and issubclass(py, ctypes._Pointer) and py._type_ is want
        return None if ok else f"{ctype} declared as {py}, want POINTER({want.__name__})"
    # T** : a pointer to something pointer-sized that carries T*.
    if not (isinstance(py, type) and issubclass(py, ctypes._Pointer)):
        return f"{ctype} declared as {py}"
    inner = py._type_
    if not _is_pointer_type(inner):
        return f"{ctype} declared as POINTER({inner})"
    if inner in _PTR_LIKE:
        return None
    return _mismatch(base + "*" * (depth - 1), inner)


PROTOS = _prototypes()


def test_header_parses():
    # A parser that finds nothing would pass everything below.
    assert len(PROTOS) >= 45
    assert PROTOS["v6d_get"] == ("v6d_status", ["v6d_client", "uint64_t", "const uint8_t**", "uint64_t*", "v6d_error*"])
    assert PROTOS["v6d_abi_version"] == ("int32_t", [])
    assert PROTOS["v6d_put_inline"][1][4] == "const void*const*"


def test_every_function_is_declared_once():
    assert sorted(bindings.SIGNATURES) == sorted(PROTOS)


def test_internal_functions_are_those_of_the_internal_header():
    internal = _prototypes(INTERNAL_HEADER)
    public = _prototypes(HEADER)
    assert len(internal) >= 7
    assert not set(internal) & set(public), "a function declared in both headers"
    assert sorted(bindings.INTERNAL) == sorted(internal)
    # The fast path's functions are not in the public header.
    assert {"v6d_get_object_args", "v6d_release_queue", "v6d_pretouch"} <= set(internal)


@pytest.mark.parametrize("name", sorted(PROTOS))
def test_signature(name: str):
    ret, params = PROTOS[name]
    restype, argtypes = bindings.SIGNATURES[name]
    problems = []
    if (why := _mismatch(ret, restype, result=True)) is not None:
        problems.append(f"result: {why}")
    if len(argtypes) != len(params):
        problems.append(f"{len(argtypes)} argtypes for {len(params)} parameters {params}")
    else:
        for i, (c, py) in enumerate(zip(params, argtypes)):
            if (why := _mismatch(c, py)) is not None:
                problems.append(f"parameter {i}: {why}")
    assert not problems, f"{name}: " + "; ".join(problems)


def test_mismatch_is_detected():
    # The checker itself can fail: wrong width, wrong pointee, wrong arity.
    assert _mismatch("uint64_t", ctypes.c_uint32)
    assert _mismatch("uint64_t*", ctypes.POINTER(ctypes.c_int64))
    assert _mismatch("v6d_error*", ctypes.c_void_p)
    assert _mismatch("const uint8_t**", ctypes.POINTER(ctypes.c_uint64))
    assert _mismatch("void", ctypes.c_int32, result=True)
    assert _mismatch("uint64_t*", ctypes.POINTER(ctypes.c_uint64)) is None


def _enum_block(name: str) -> dict[str, int]:
    m = re.search(r"typedef\s+enum\s+" + name + r"\s*\{(.*?)\}", _header_code(), re.DOTALL)
    assert m, f"enum {name} not found in the header"
    return {k: int(v) for k, v in re.findall(r"(V6D_\w+)\s*=\s*(\d+)", m.group(1))}


def _anonymous_enums() -> dict[str, int]:
    out: dict[str, int] = {}
    for body in re.findall(r"\benum\s*\{(.*?)\}", _header_code(), re.DOTALL):
        out.update({k: int(v) for k, v in re.findall(r"(V6D_\w+)\s*=\s*(\d+)", body)})
    return out


def test_status_codes_match_the_header():
    header = {k.removeprefix("V6D_"): v for k, v in _enum_block("v6d_status").items()}
    assert len(header) >= 40
    assert {s.name: int(s.value) for s in errors.Status} == header


def _go_codes() -> dict[str, int]:
    text = STATUS_GO.read_text()
    return {k: int(v) for k, v in re.findall(r"^\s*(\w+)\s+Code\s*=\s*(\d+)", text, re.MULTILINE)}


_GO_ALIASES = {"VineyardServerNotReady": "SERVER_NOT_READY"}


def _squash(name: str) -> str:
    return name.replace("_", "").lower()


def test_status_codes_match_go():
    go = _go_codes()
    assert len(go) >= 40
    header = {k.removeprefix("V6D_"): v for k, v in _enum_block("v6d_status").items()}
    by_squashed = {_squash(k): v for k, v in header.items()}
    got = {}
    for name, code in go.items():
        key = _squash(_GO_ALIASES.get(name, name))
        assert key in by_squashed, f"Go status {name} has no V6D_ code in the header"
        got[key] = code
    assert got == by_squashed


def test_every_status_has_an_exception():
    for s in errors.Status:
        exc = errors.exception_for(int(s), "x")
        assert exc.code == int(s) or s == errors.Status.OK, s


def test_flags_match_the_header():
    flags = {k: v for k, v in _anonymous_enums().items() if not k.startswith("V6D_ARROW_FLAG")}
    want = {
        "V6D_GET_UNSAFE",
        "V6D_DELETE_FORCE",
        "V6D_DELETE_SHALLOW",
        "V6D_DELETE_MEMORY_TRIM",
        "V6D_ARROW_RECORD_BATCH",
        "V6D_ARROW_CHUNKED",
    }
    assert want <= set(flags)
    for name, value in flags.items():
        py = name.removeprefix("V6D_")
        assert getattr(bindings, py, None) == value, f"_bindings.{py} must be {value} ({name})"


def test_abi_version_matches_the_header():
    m = re.search(r"#define\s+V6D_ABI_VERSION\s+(\d+)", HEADER.read_text())
    assert m
    assert bindings.ABI_VERSION == int(m.group(1))


def test_internal_version_matches_the_header():
    m = re.search(r"#define\s+V6D_INTERNAL_VERSION\s+(\d+)", INTERNAL_HEADER.read_text())
    assert m
    assert bindings.INTERNAL_VERSION == int(m.group(1))


def test_status_names_of_the_c_shim_match_go():
    # v6d_status_name answers known codes from a C table (it must work in a
    # forked child, without Go); Go's codeNames is the source.
    shim = dict(re.findall(r'case\s+(V6D_\w+):\s*return\s+"(\w+)";', SHIM_C.read_text()))
    header = _enum_block("v6d_status")
    go_names = dict(re.findall(r"(\w+):\s*\"(\w+)\"", STATUS_GO.read_text().split("var codeNames", 1)[1]))
    go_codes = _go_codes()
    assert set(shim) == set(header), "the C table must name every v6d_status"
    by_code = {go_codes[k]: v for k, v in go_names.items()}
    assert {header[k]: v for k, v in shim.items()} == by_code


def test_error_struct_matches_the_header():
    m = re.search(r"typedef\s+struct\s+v6d_error\s*\{(.*?)\}", _header_code(), re.DOTALL)
    assert m
    fields = [_param_type(f) + " " + f.split()[-1].lstrip("*") for f in m.group(1).split(";") if f.strip()]
    assert fields == ["int32_t code", "char* message"]
    assert [n for n, _ in bindings.V6DError._fields_] == ["code", "message"]
    assert bindings.V6DError._fields_[0][1] is ctypes.c_int32
    assert _is_pointer_type(bindings.V6DError._fields_[1][1])


def test_forked_blob_struct_matches_the_header():
    m = re.search(r"typedef\s+struct\s+v6d_forked_blob\s*\{(.*?)\}", _header_code(), re.DOTALL)
    assert m
    fields = [_param_type(f) + " " + f.split()[-1].lstrip("*") for f in m.group(1).split(";") if f.strip()]
    assert fields == ["uint64_t id", "const void* data", "uint64_t size"]
    assert [n for n, _ in bindings.V6DForkedBlob._fields_] == ["id", "data", "size"]
    assert [t for _, t in bindings.V6DForkedBlob._fields_] == [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64]


def test_get_args_struct_matches_the_header():
    m = re.search(r"typedef\s+struct\s+v6d_get_args\s*\{(.*?)\}\s*v6d_get_args", _header_code(), re.DOTALL)
    assert m
    fields = [_param_type(f) + " " + f.split()[-1].lstrip("*") for f in m.group(1).split(";") if f.strip()]
    c_types = {"uint64_t": ctypes.c_uint64, "uint32_t": ctypes.c_uint32, "size_t": ctypes.c_size_t}
    declared = bindings.V6DGetArgs._fields_
    assert [f.split()[-1] for f in fields] == [n for n, _ in declared]
    for field, (name, py) in zip(fields, declared):
        ctype = field.rsplit(" ", 1)[0]
        if ctype == "v6d_error":
            assert py is bindings.V6DError, name
        elif ctype in c_types:
            assert py is c_types[ctype], name
        else:  # a pointer: one the test of signatures would accept for a parameter
            assert _mismatch(ctype, py) is None, name
    # Every field is a word: the client reads and writes them by index.
    assert all(getattr(bindings.V6DGetArgs, n).offset % 8 == 0 for n, _ in declared if n != "reserved")
    assert ctypes.sizeof(bindings.V6DGetArgs) == 13 * 8
