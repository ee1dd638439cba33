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
    draws = sweep.get("uncertainty", 0)
    of_them = f"{status['draw_runs']} of them parameter draws, " if status.get("draw_runs") else ""
    lines = [
        f"simapf sweep: {sweep.get('name', '?')}, {status.get('runs', len(df))} runs "
        f"({of_them}{status.get('skipped', 0)} already done, {status.get('ran', len(df))} run now) in "
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
    bounds = _bounds(df, cols)
    if factors:
        short = short_names(factors)
        keyed = pd.concat([df[factors].astype(str).set_axis(short, axis=1), values, bounds], axis=1)
        table = keyed.groupby(short, sort=False).agg(_per_combination(values, bounds)).reset_index()
    else:
        whole = pd.concat([values, bounds], axis=1)
        table = whole.groupby(lambda _row: 0).agg(_per_combination(values, bounds)).reset_index(drop=True)
    table = _with_intervals(table, cols)
    means = f"means over {reps} replication{'s' if reps > 1 else ''} per combination"
    if not bounds.empty:
        means += (f", [90 % interval] of replication 0 from {draws} parameter draws on its seed and, where "
                  "validated, the model's error")  # fmt: skip
    lines.append(f"  {means}:")
    shown = table.head(MAX_ROWS).to_string(index=False, float_format=lambda x: f"{x:,.2f}")
    lines += ["  " + line for line in shown.splitlines()]
    if len(table) > MAX_ROWS:
        lines.append(f"  ... {len(table) - MAX_ROWS} more; all runs: simapf.load_sweep(DIR) in Python")
    lines += _contrast_lines(df.attrs.get("contrasts") or [], cols, factors)
    return "\n".join(lines) + "\n"


def _contrast_lines(contrasts: list[dict], cols, factors: list[str]) -> list[str]:
    """Each level against its factor's first, for the shown columns: difference and ratio, each
    with its 90 % interval."""
    shown = {c: (h, scale) for c, h, scale in cols}
    rows = [r for r in contrasts if r["metric"] in shown]
    if not rows:
        return []
    short = dict(zip(factors, short_names(factors))) if factors else {}
    out = ["  against each factor's first level, the other factors equal: difference [90 %] and ratio [90 %]"
           " (the model's error shared as its validation's experiments share it)"]  # fmt: skip
    for r in rows[: MAX_ROWS]:
        h, scale = shown[r["metric"]]
        at = ", ".join(f"{short.get(g, g)}={r[f'at/{g}']}" for g in factors if g != r["factor"] and f"at/{g}" in r)
        where = f"{short.get(r['factor'], r['factor'])}={r['level']} vs {r['baseline']}" + (f" ({at})" if at else "")
        diff = "{:+,.2f} [{:+,.2f} to {:+,.2f}]".format(*(r[k] / scale for k in ("difference", "difference_lo", "difference_hi")))
        ratio = "x{:.3g} [{:.3g} to {:.3g}]".format(r["ratio"], r["ratio_lo"], r["ratio_hi"])
        out.append(f"    {h}, {where}: {diff}, {ratio}")
    if len(rows) > MAX_ROWS:
        out.append(f"    ... {len(rows) - MAX_ROWS} more: simapf.load_sweep(DIR, contrasts=True) in Python")
    return out


def _bounds(df: pd.DataFrame, cols) -> pd.DataFrame:
    """The shown columns' interval bounds (`<column>_lo`, `_hi`), scaled as the columns are."""
    out = {}
    for c, h, scale in cols:
        if f"{c}_lo" in df.columns:
            out[f"{h} lo"] = df[f"{c}_lo"].astype(float) / scale
            out[f"{h} hi"] = df[f"{c}_hi"].astype(float) / scale
    return pd.DataFrame(out, index=df.index)


def _per_combination(values: pd.DataFrame, bounds: pd.DataFrame) -> dict[str, str]:
    # A combination's rows share its interval (replication 0's); the values are averaged.
    return {**{h: "mean" for h in values.columns}, **{b: "first" for b in bounds.columns}}


def _with_intervals(table: pd.DataFrame, cols) -> pd.DataFrame:
    """Each shown column with its interval, `2,100.00 [1,400.00 to 3,300.00]`, where it has one."""
    for _c, h, _s in cols:
        if f"{h} lo" not in table.columns:
            continue
        lo, hi = table.pop(f"{h} lo"), table.pop(f"{h} hi")
        table[h] = [_number(v) + (f" [{_number(a)} to {_number(b)}]" if pd.notna(a) and pd.notna(b) else "")
                    for v, a, b in zip(table[h], lo, hi)]  # fmt: skip
    return table


def _number(x: float) -> str:
    return f"{x:,.2f}" if pd.notna(x) else "NaN"


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
