"""The systems under test: ours and each peer, behind ``base.System``.

``NAMES`` maps a system's name to its module; an agent imports only the one it drives.
"""

NAMES = {
    "ours": "harness.systems.ours",
    "shm": "harness.systems.shm",
    "pickle": "harness.systems.pipe",
    "ray": "harness.systems.ray_peer",
    "upstream": "harness.systems.upstream",
}

PEERS = ("shm", "pickle", "ray", "upstream")
