#!/usr/bin/env python3
"""make bench: measure ours against physical baselines and peers, in one run.

    benchmarks/run.py [--quick | --smoke] [--only PATTERN,...] [--no-peers | --peers LIST]
                      [--sizes 1Mi,64Mi,...] [--out DIR] [--update-readme]

Full runs and --quick write benchmarks/results/latest.{json,md,png}; --smoke (what
`make test` runs: a few iterations of each of our figures and the C program, no peers)
writes to a temporary directory and fails if any figure fails or the report does not
check out. docs/performance.md explains every figure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import machine, report
from harness.plan import Selection, mode
from harness.results import FAILED, OK
from harness.runner import ROOT, Runner
from harness.systems import PEERS
from harness.units import parse_size

README_BEGIN = "<!-- bench:begin (benchmarks/run.py --update-readme writes this part) -->"
README_END = "<!-- bench:end -->"


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    m = p.add_mutually_exclusive_group()
    m.add_argument("--quick", action="store_true", help="fewer trials, sizes up to 64 MiB, 1M-row frames (< 2 min)")
    m.add_argument("--smoke", action="store_true", help="a few iterations of every figure of ours, no peers "
                   "(checks that the harness works; output to a temp dir)")
    p.add_argument("--only", default="", help="comma-separated globs over figure ids and system names, "
                   "e.g. 'get.*', 'rtt.*,ours'")
    peers = p.add_mutually_exclusive_group()
    peers.add_argument("--no-peers", action="store_true", help="measure ours and the baselines only")
    peers.add_argument("--peers", default=None, help=f"comma-separated subset of {','.join(PEERS)}")
    p.add_argument("--sizes", default="", help="large sizes, e.g. 1Mi,64Mi,1Gi (default: by mode)")
    p.add_argument("--out", default=None, help="output directory (default benchmarks/results; smoke: a temp dir)")
    p.add_argument("--metrics", action="store_true", help="run our daemons with their metrics listener on "
                   "(requests timed), to compare with a run without")
    p.add_argument("--update-readme", action="store_true", help="copy the targets and tables into README.md")
    return p.parse_args(argv)


def update_readme(md: str, doc: dict) -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    if README_BEGIN not in text or README_END not in text:
        raise SystemExit(f"bench: README.md has no {README_BEGIN} ... {README_END} block")
    body = ("## Targets" + md.split("\n## Targets", 1)[1]).replace("## ", "### ").rstrip()
    make = "make bench" if doc["mode"] == "full" else f"make bench BENCH_ARGS=--{doc['mode']}"
    intro = (f"Measured on {report.machine_line(doc)}, with `{make}` (`{' '.join(doc['machine']['argv'])}`). "
             "A peer's cell shows how many times better ours is (above 1: ours wins).")
    block = f"{README_BEGIN}\n\n{intro}\n\n{body}\n\n{README_END}"
    head, rest = text.split(README_BEGIN, 1)
    readme.write_text(head + block + rest.split(README_END, 1)[1])


def main(argv: list) -> int:
    args = parse_args(argv)
    if args.metrics:
        os.environ["V6D_BENCH_METRICS"] = "1"  # harness.daemons.METRICS_ENV, read where daemons start
    name = "smoke" if args.smoke else "quick" if args.quick else "full"
    m = mode(name, [parse_size(s) for s in args.sizes.split(",") if s])
    if args.peers is not None:
        peers = [p for p in args.peers.split(",") if p]
        unknown = set(peers) - set(PEERS)
        if unknown:
            raise SystemExit(f"bench: unknown peers {sorted(unknown)}; choose from {list(PEERS)}")
    else:
        peers = list(PEERS) if m.peers and not args.no_peers else []
    tmp = None
    if args.out:
        out = Path(args.out)
    elif args.smoke:
        out = Path(tmp := tempfile.mkdtemp(prefix="v6d-bench-smoke-"))
    else:
        out = ROOT / "benchmarks" / "results"
    work = ROOT / "build" / "bench" / "logs"
    shutil.rmtree(work, ignore_errors=True)

    info = machine.info(str(ROOT))
    t0 = time.monotonic()
    print(f"bench: {name} run, peers: {', '.join(peers) or 'none'}; logs in {work}", flush=True)
    runner = Runner(m, Selection([p for p in args.only.split(",") if p]), peers, work)
    results = runner.run()
    info["load_after"] = machine.load()
    info["seconds"] = round(time.monotonic() - t0, 1)
    doc = report.document(info, name, runner.systems, results)
    for note in report.write(doc, out):
        print(f"bench: {note}")
    problems = report.self_check(out)
    failed = [r for r in results if r.status == FAILED and r.system in ("ours", "baseline")]
    print(f"bench: {len([r for r in results if r.status == OK])} of {len(results)} figures measured in "
          f"{info['seconds']} s; report in {out}")
    if args.update_readme:
        update_readme((out / "latest.md").read_text(), doc)
        print("bench: README.md updated")
    for p in problems:
        print(f"bench: report check: {p}", file=sys.stderr)
    for r in failed:
        print(f"bench: FAILED {r.system} {r.figure.id}: {r.reason}", file=sys.stderr)
    if args.smoke:
        peer_failed = [r for r in results if r.status == FAILED and r not in failed]
        failed += peer_failed
        if not failed and not problems and tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed or problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
