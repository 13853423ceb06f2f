"""``python -m vineyard.io``: files into the store and back.

    python -m vineyard.io read PATH [--socket S] [--format F] [--stream] [--name N]
    python -m vineyard.io write ID PATH [--socket S] [--format F]

``read`` stores the file as one table and prints its id (``--name`` names it,
persisted), or with ``--stream`` prints the id of a RecordBatchStream at once
and writes it as another process reads it, exiting when it is read.
``write`` writes a stored table or a stream (read to its end) to PATH.
Formats: parquet, csv, orc, json (JSON lines); PATH a local path or, with
fsspec installed, a URL.
"""

from __future__ import annotations

import argparse
import sys

from . import files


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vineyard.io", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("read", help="store a file (or stream it)")
    r.add_argument("path")
    r.add_argument("--stream", action="store_true", help="print a stream's id and write the file into it")
    r.add_argument("--name", help="persist the table and name it")
    w = sub.add_parser("write", help="write a stored table or a stream to a file")
    w.add_argument("id")
    w.add_argument("path")
    for sp in (r, w):
        sp.add_argument("--socket", help="the daemon's socket (default: VINEYARD_IPC_SOCKET)")
        sp.add_argument("--format", choices=sorted(set(files.FORMATS.values())))
    args = p.parse_args(argv)

    import vineyard

    client = vineyard.connect(args.socket)
    if args.cmd == "read":
        if args.stream:
            handlers: list = []
            stream = files.read(args.path, client=client, format=args.format, handlers=handlers)
            print(repr(stream.id), flush=True)
            for t in handlers:
                t.join()
            return 0
        oid = files.read(args.path, client=client, format=args.format, accumulate=True)
        if args.name:
            client.persist(oid)
            client.put_name(oid, args.name)
        print(repr(oid))
        return 0
    files.write(args.path, vineyard.ObjectID(args.id), client=client, format=args.format)
    return 0


if __name__ == "__main__":
    sys.exit(main())
