"""The benchmark harness behind ``make bench`` (entry point: benchmarks/run.py).

Modules, from the bottom up:

- ``units``     sizes and durations: parsing and formatting.
- ``stats``     medians and percentiles of repeated trials.
- ``daemons``   starting a vineyardd (ours or upstream's) and waiting for its socket.
- ``values``    the data every system stores: NumPy arrays, DataFrames, Arrow tables.
- ``systems/``  one module per system under test (ours and each peer), all behind one
                interface (``systems.base.System``).
- ``jsonlines`` the JSON-lines agent protocol: ``serve`` (an agent's loop) and ``Agent``
                (a driver's handle on one agent process); the interop suite's clients
                (tests/interop/agent.py) speak it too.
- ``agent``     the process that drives one system: it runs inside that system's Python
                environment and answers JSON-lines commands, so the harness never
                imports a peer (upstream Vineyard's import name collides with ours).
- ``agents``    the harness side of that protocol, and the peer virtual environments.
- ``baselines`` physical floors measured in the harness: socket round trip, memcpy.
- ``cbench``    the C program (benchmarks/c/bench.c): C socket round trip, C client.
- ``plan``      the modes (smoke/quick/full) and the list of figures.
- ``report``    targets, Markdown, JSON and the PNG chart.
"""
