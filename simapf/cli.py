"""The `simapf` command line.

Each subcommand imports what it needs when it runs, so `simapf replay` does not pay for
pydantic or the simulator at start-up. A user-caused error (bad input, missing file) ends in
one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import sys

import click

from simapf import __version__
from simapf.errors import SimapfError


def _fail(err: Exception) -> None:
    click.echo(f"simapf: error: {err}", err=True)
    sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="simapf")
def main() -> None:
    """simapf: simulate kube-apiserver memory and CPU under API Priority and Fairness."""
    import logging

    # Warnings about the user's input (e.g. a FlowSchema naming a missing priority level) are
    # logged by the library; the command line shows them in its own voice.
    logging.basicConfig(format="simapf: warning: %(message)s", level=logging.WARNING)


@main.command("apf-report")
@click.option("--server-concurrency", default=600, show_default=True, type=click.IntRange(min=1),
              help="--max-requests-inflight plus --max-mutating-requests-inflight.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="FlowSchema and PriorityLevelConfiguration YAML as `kubectl get flowschemas,"
                   "prioritylevelconfigurations -o yaml` prints it; default: the 1.37 bootstrap "
                   "configuration. Mandatory objects are added if missing.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True)
def apf_report(server_concurrency: int, config_path: str | None, fmt: str) -> None:
    """Concurrency limits and max seats of every priority level.

    Columns: priority_level, nominal_cl, lendable_cl, min_cl, max_cl, idle_current_cl (the
    CurrentCL the borrowing adjuster settles at when no level has demand), max_seats (empty
    for exempt and Reject levels, which use the global caps).
    """
    from simapf.apf.report import report

    try:
        text = report(server_concurrency, config_path, fmt)
    except SimapfError as err:
        _fail(err)
    click.echo(text, nl=False)


@main.command()
@click.option("--level", "level_path", required=True, type=click.Path(dir_okay=False),
              help="LEVEL.json: name, concurrencyLimit, queues, handSize, queueLengthLimit, "
                   "requestWaitLimitSeconds (default 15, at most 60); queues 0 = Reject level.")
@click.option("--trace", "trace_path", required=True, type=click.Path(dir_okay=False),
              help="TRACE.csv with columns id, arrival_s, flow, initial_seats, final_seats, "
                   "additional_latency_s, service_s (header required, any order).")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="OUT.csv to write: one row per trace row, in trace order.")
def replay(level_path: str, trace_path: str, out_path: str) -> None:
    """Replay a request trace through one priority level with a fixed concurrency limit.

    `flow` is `flowSchemaName/distinguisher` (split at the first `/`); its hash, and so its
    queues, are upstream's. OUT.csv columns: id, arrival_s, dispatched, rejected_reason,
    queue, dispatch_s, finish_s (seats released), wait_s.
    """
    from simapf.apf.replay import run_replay

    try:
        counts = run_replay(level_path, trace_path, out_path)
    except SimapfError as err:
        _fail(err)
    click.echo(
        f"replayed {counts['requests']} requests: {counts['dispatched']} dispatched, "
        f"{counts['rejected']} rejected -> {out_path}",
        err=True,
    )


@main.command("run")
@click.argument("scenario_path", required=False, type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Directory to write series (Parquet, CSV), summary.json and the overview figure to.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario field by dotted key, e.g. --set run.duration_s=120 "
                   "--set clients.controllers.count=50 (repeatable; values are YAML).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON instead of text.")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="A progress bar on stderr (never when stderr is not a terminal).")
def run_command(scenario_path: str | None, out_dir: str | None, overrides: tuple[str, ...], as_json: bool,
                progress: bool) -> None:
    """Run a scenario and print what happened.

    With no SCENARIO it runs the built-in default: an informer relist storm after a network
    outage, first with informers that LIST, then again after they switch to WatchList.
    """
    import json

    from simapf.run import run
    from simapf.scenario import default_scenario_path, load_scenario
    from simapf.summary_text import format_summary

    try:
        loaded = load_scenario(scenario_path or default_scenario_path(), overrides)
        if not scenario_path:
            loaded = type(loaded)(loaded.scenario, loaded.base_dir, "<built-in default>")
        result = run(loaded, progress=progress)
        if out_dir:
            result.write(out_dir)
    except SimapfError as err:
        _fail(err)
    if as_json:
        from simapf.result import _json_default

        click.echo(json.dumps(result.summary, indent=2, default=_json_default))
    else:
        click.echo(format_summary(result.summary), nl=False)
        if out_dir:
            click.echo(f"  wrote {out_dir}/: series.parquet, series.csv, summary.json, overview.png, overview.svg")


if __name__ == "__main__":
    main()
