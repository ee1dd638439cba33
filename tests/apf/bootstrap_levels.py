"""The bootstrap priority levels as the limits arithmetic sees them (apf-mechanics §1.3)."""

from simapf.apf.limits import LevelSpec

BOOTSTRAP_LEVELS = (
    LevelSpec("exempt", exempt=True, nominal_concurrency_shares=0, lendable_percent=0),
    LevelSpec("catch-all", exempt=False, nominal_concurrency_shares=5, lendable_percent=0),
    LevelSpec("system", False, 30, 33, None, queuing=True, hand_size=6),
    LevelSpec("node-high", False, 40, 25, None, queuing=True, hand_size=6),
    LevelSpec("leader-election", False, 10, 0, None, queuing=True, hand_size=4),
    LevelSpec("workload-high", False, 40, 50, None, queuing=True, hand_size=6),
    LevelSpec("workload-low", False, 100, 90, None, queuing=True, hand_size=6),
    LevelSpec("global-default", False, 20, 50, None, queuing=True, hand_size=6),
)
