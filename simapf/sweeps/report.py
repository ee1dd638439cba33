"""A finished sweep at the terminal: what ran where, then key metrics per combination of levels
(means over replications). The full table is a DataFrame away: `simapf.load_sweep(DIR)`."""

from __future__ import annotations

import pandas as pd

_COLUMNS = (  # column, heading, scale
    ("peak_rss_bytes", "peak RSS MB", 1e6),
    ("oom_kills", "OOM kills", 1),
    ("rejection_rate", "rejected %", 0.01),
    ("throughput_ok_per_s", "ok/s", 1),
    ("seats_per_list_mean", "seats/LIST", 1),
    ("mean_cores", "cores", 1),
)
MAX_ROWS = 60


def format_sweep(df: pd.DataFrame) -> str:
    status = df.attrs.get("status", {})
    sweep = df.attrs.get("sweep", {})
    factors = [f for f in sweep.get("factors", {}) if f in df.columns]
    reps = sweep.get("replications", 1)
    lines = [
        f"simapf sweep: {sweep.get('name', '?')}, {status.get('runs', len(df))} runs "
        f"({status.get('skipped', 0)} already done, {status.get('ran', len(df))} run now) in "
        f"{status.get('wall_s', 0):.1f} s on {status.get('backend', '?')}"
        + (f" -> {status['out']}" if status.get("out") else "")
    ]
    cols = [(c, h, s) for c, h, s in _COLUMNS if c in df.columns]
    if df.empty or not cols:
        return "\n".join(lines) + "\n"
    values = df[[c for c, _h, _s in cols]].astype(float)
    for c, _h, scale in cols:
        values[c] = values[c] / scale
    values.columns = [h for _c, h, _s in cols]
    if factors:
        short = short_names(factors)
        keyed = pd.concat([df[factors].astype(str).set_axis(short, axis=1), values], axis=1)
        table = keyed.groupby(short, sort=False).mean().reset_index()
    else:
        table = values.mean().to_frame().T
    lines.append(f"  means over {reps} replication{'s' if reps > 1 else ''} per combination:")
    shown = table.head(MAX_ROWS).to_string(index=False, float_format=lambda x: f"{x:,.2f}")
    lines += ["  " + line for line in shown.splitlines()]
    if len(table) > MAX_ROWS:
        lines.append(f"  ... {len(table) - MAX_ROWS} more; all runs: simapf.load_sweep(DIR) in Python")
    return "\n".join(lines) + "\n"


def short_names(keys: list[str]) -> list[str]:
    """The shortest dotted suffix of each key that tells it apart from the others."""
    names = []
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            name = ".".join(parts[-n:])
            if sum(1 for other in keys if other == name or other.endswith("." + name)) == 1:
                break
        names.append(name)
    return names
