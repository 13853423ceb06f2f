"""Upstream's client configuration file: ``VINEYARD_CONFIG`` or ``connect(config=...)``.

The file is YAML, as upstream's ``_parse_configuration`` reads it::

    Vineyard:
      IPCSocket: vineyard.sock          # relative: to the file's directory
      RPCEndpoint: host1:9600,host2:9600

``config`` names the file, or a directory holding ``vineyard-config.yaml`` or
``vineyard/vineyard-config.yaml``; without one, ``VINEYARD_CONFIG``, then
``/var/run``. As upstream's: a socket path that does not exist is ignored (the
daemon is not there), and a file that is not there is no configuration. Unlike
upstream's, a file that is there but cannot be read, or says something else
than this shape, is an error naming it (upstream ignores it silently).

PyYAML reads the file when it is installed; without it, a reader of exactly
the shape above (a ``Vineyard:`` mapping of plain or quoted scalars, comments)
does, and anything else asks for PyYAML.
"""

from __future__ import annotations

import os

__all__ = ["DEFAULT_DIR", "FILE_NAMES", "config_path", "parse_configuration"]

DEFAULT_DIR = "/var/run"
FILE_NAMES = ("vineyard-config.yaml", os.path.join("vineyard", "vineyard-config.yaml"))


def config_path(config: str | None = None) -> str | None:
    """The configuration file that ``config`` (default: ``VINEYARD_CONFIG``,
    then ``/var/run``) names, or None when there is none."""
    config = config or os.environ.get("VINEYARD_CONFIG") or DEFAULT_DIR
    if os.path.isdir(config):
        for name in FILE_NAMES:
            path = os.path.join(config, name)
            if os.path.isfile(path):
                return path
        return None
    return config if os.path.isfile(config) else None


def parse_configuration(config: str | None = None) -> tuple[str | None, str | None]:
    """``(ipc_socket, rpc_endpoint)`` of the configuration ``config`` names
    (see the module's doc); ``(None, None)`` when there is no file. Raises
    ValueError for a file that cannot be read as the configuration."""
    path = config_path(config)
    if path is None:
        return None, None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ValueError(f"vineyard: cannot read the configuration {path}: {e}") from e
    section = _load(text, path).get("Vineyard") or {}
    if not isinstance(section, dict):
        raise ValueError(f"vineyard: {path}: 'Vineyard' is not a mapping")  # noqa: TRY004 (the file's fault)
    socket, endpoint = section.get("IPCSocket"), section.get("RPCEndpoint")
    if socket is not None:
        socket = str(socket)
        if not os.path.isabs(socket):
            socket = os.path.join(os.path.dirname(path), socket)
        if not os.path.exists(socket):
            socket = None
    return socket, (str(endpoint) if endpoint else None)


def _load(text: str, path: str) -> dict:
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        return _load_plain(text, path)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"vineyard: {path} is not YAML: {e}") from e
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ValueError(f"vineyard: {path} is not a YAML mapping")  # noqa: TRY004 (the file's fault)
    return doc


def _load_plain(text: str, path: str) -> dict:
    """Reads the one shape of the module's doc without PyYAML."""
    doc: dict[str, dict[str, str] | str] = {}
    section: dict[str, str] | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip() or line.strip() == "---":
            continue
        key, sep, value = line.strip().partition(":")
        if not sep:
            raise ValueError(f"vineyard: {path}:{n}: cannot read {raw.strip()!r} without PyYAML (pip install pyyaml)")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if not line[0].isspace():
            if value:  # a top-level scalar: not ours
                doc[key], section = value, None
            else:
                section = {}
                doc[key] = section
        elif section is None:
            raise ValueError(f"vineyard: {path}:{n}: an indented key outside a section")
        else:
            section[key] = value
    return doc
