"""The `simapf` command line.

Each subcommand imports what it needs when it runs, so `simapf replay` does not pay for
pydantic or the simulator at start-up. A user-caused error (bad input, missing file) ends in
one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
from typing import TYPE_CHECKING

import click

from simapf.version import __version__
from simapf.errors import SimapfError, users_traceback
from simapf.outputs import FORMATS as EXPORT_FORMATS
from simapf.uncertainty import MAX_DRAWS

if TYPE_CHECKING:
    from simapf.schema.summary import Summary


# Every command that can run on a Dask cluster takes its scheduler the same way.
dask_option = click.option(
    "--dask", "dask_address", metavar="SCHEDULER_ADDRESS",
    help="Run on an existing Dask cluster, e.g. tcp://dask-scheduler:8786 (needs simapf[dask] here and on the workers).",
)  # fmt: skip


# Every command that writes a result directory refuses one that holds what is not simapf's.
force_option = click.option(
    "--force", is_flag=True,
    help="Write into --out even if it holds files that are not simapf's (they are kept; files of the same "
         "names as simapf's are replaced).",
)  # fmt: skip


class _Duration(click.ParamType):
    """A Go duration (simapf.jobs.budget): refused in one line, as every bad option value is."""

    name = "DURATION"

    def convert(self, value, param, ctx):  # type: ignore[override]
        from simapf.jobs.budget import budget_problem

        problem = budget_problem(value)
        if problem is not None:
            self.fail(f"{value!r}: {problem}", param, ctx)
        return str(value).strip()


# Every long command takes a time budget the same way (simapf.jobs.budget).
budget_option = click.option(
    "--budget", metavar="DURATION", type=_Duration(),
    help="Stop once this much time has passed since the command started (a Go duration: 90s, 10m, 1h30m), at the "
         "next point it can continue from; say what is left and the command that continues it (exit status 3).",
)  # fmt: skip


def cache_option(command):
    """--no-cache on a command that runs simulations; with the cache on, its settings are checked
    before any work, and a line on stderr afterwards says how many runs came from it."""

    @click.option("--no-cache", "no_cache", is_flag=True,
                  help="Compute every run, neither reading nor keeping results in the result cache "
                       "(also SIMAPF_NO_CACHE=1; `simapf cache` shows it).")  # fmt: skip
    @functools.wraps(command)
    def with_cache(*args, no_cache: bool, **kwargs):
        from simapf.simulation import cache

        with cache.turned_off(no_cache):
            try:
                where = cache.check()
            except SimapfError as err:
                _fail(err)
            reused, ran = cache.tally.snapshot()
            command(*args, **kwargs)
            reused, ran = cache.tally.reused - reused, cache.tally.ran - ran
        if reused:
            them = "it" if reused == 1 else "them"
            # A scheduler named, and never asked for anything: said, not silently passed over.
            scheduler = kwargs.get("dask_address")
            unused = f"; the Dask scheduler at {scheduler} was not needed" if scheduler and not ran else ""
            click.echo(f"simapf: {_reused(reused, ran)} came from the result cache in {where.folder} "
                       f"(--no-cache computes {them} again){unused}", err=True)  # fmt: skip

    return with_cache


def _reused(reused: int, ran: int) -> str:
    """"all 4 runs", "3 of 4 runs", "the run": how many of the runs came from the cache."""
    if reused + ran == 1:
        return "the run"
    return f"all {reused} runs" if not ran else f"{reused} of {reused + ran} runs"


_DEBUG = False  # --debug: show the traceback of an error raised in the user's own code
_ARGS: list[str] = []  # the command line, without the program's name: what a budget stop repeats
_STARTED = 0.0  # when the command started (time.monotonic()): what its --budget counts from


def _fail(err: Exception) -> None:
    click.echo(f"simapf: error: {err}", err=True)
    if _DEBUG:
        text = users_traceback(err)
        if text is not None:
            click.echo(text, err=True)
    sys.exit(2)


def _exit_on_signal(signum: int, _frame) -> None:
    # SIGTERM and SIGHUP end the command as Ctrl-C does: through the exception handlers that
    # remove half-written output, instead of killing the process where it stands.
    raise SystemExit(128 + signum)


def _budget(text: str | None):
    from simapf.jobs.budget import Budget

    return Budget.parse(text, started=_STARTED)


def _say(line: str) -> None:
    click.echo(line, err=True)


def _budget_stop(err) -> None:
    """The end of work its budget stopped: what was done and is left, the command that continues."""
    import shlex

    from simapf.jobs.budget import BUDGET_EXIT, continue_command

    click.echo(f"simapf: {err.summary()}", err=True)
    click.echo(f"simapf: continue with: simapf {shlex.join(continue_command(_ARGS, err.resume))}", err=True)
    sys.exit(BUDGET_EXIT)


def _announce(loaded_scenarios, runs: int = 1, workers: int | None = 1) -> None:
    """Before a long or large piece of work starts, say how large it is (one warning line), so
    that building it does not sit silent: `runs` runs of the largest of `loaded_scenarios`."""
    import os

    from simapf.scenario import work

    works = [work.estimate(loaded) for loaded in loaded_scenarios]
    largest = max(works, key=lambda w: (w.seconds(), w.memory_bytes()))
    line = work.notice(largest, runs, workers or os.cpu_count() or 1)
    if line:
        click.echo(f"simapf: warning: {line}", err=True)


def _draws_estimate(loaded, draws: int, workers: int | None) -> str:
    """The line `run --uncertainty N` starts with: the point run here, then the draws on workers."""
    from simapf.jobs.estimate import Runs, Stage, estimate
    from simapf.sweeps.backends import cpu_count

    found = estimate([Stage([Runs(loaded)]), Stage([Runs(loaded, draws)], workers or cpu_count())])
    return found.line(f"run {loaded.scenario.name}", f"about {found.runs:,} runs (the run, then {draws} parameter draws)")


def _check_out(out_dir: str | None, kind: str, force: bool) -> None:
    """Refuse a bad --out before spending the run's time, not after."""
    if out_dir:
        from pathlib import Path

        from simapf.files import check_output_directory

        check_output_directory(Path(out_dir), kind, force)


class _OneLineErrors(click.Group):
    """The command line: click's usage errors (an unknown option, a value of the wrong type) end
    in one line and exit status 2, as every other bad input does, instead of a usage block."""

    def main(self, *args, **kwargs):  # type: ignore[override]
        global _ARGS, _STARTED
        _STARTED = time.monotonic()
        given = kwargs.get("args", args[0] if args else None)
        _ARGS = [str(a) for a in given] if given is not None else sys.argv[1:]
        kwargs.pop("standalone_mode", None)
        kwargs["prog_name"] = "simapf"  # however it was started (python -m, a test's runner)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.NoArgsIsHelpError as err:
            click.echo(err.ctx.get_help() if err.ctx is not None else err.format_message(), err=True)
            sys.exit(2)
        except click.UsageError as err:
            where = f"{err.ctx.command_path}: " if err.ctx is not None else ""
            click.echo(f"simapf: error: {where}{err.format_message()}", err=True)
            sys.exit(2)
        except click.ClickException as err:
            click.echo(f"simapf: error: {err.format_message()}", err=True)
            sys.exit(2)
        except click.exceptions.Abort:
            click.echo("simapf: interrupted", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="simapf")
@click.option("--debug", is_flag=True,
              help="After an error raised in your own code (a policy module), show its traceback.")
def main(debug: bool) -> None:
    """simapf: simulate kube-apiserver memory and CPU under API Priority and Fairness."""
    import logging

    global _DEBUG
    _DEBUG = debug

    # Warnings about the user's input (e.g. a FlowSchema naming a missing priority level) are
    # logged by the library; the command line shows them in its own voice.
    logging.basicConfig(format="simapf: warning: %(message)s", level=logging.WARNING)
    import signal

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _exit_on_signal)


@main.command("compile")
@click.option("--clean", is_flag=True, help="Remove the compiled core: run pure Python again.")
@click.option("--check", is_flag=True,
              help="Only check that mypyc can translate the modules (about a minute; no C compiler, nothing built).")
def compile_core(clean: bool, check: bool) -> None:
    """Compile the modules every request passes through (mypyc; needs `pip install
    'simapf[compiled]'` and a C compiler), or remove them. Results are the same either way.

    A build takes minutes: it says what it does as it goes, and how long the last one took."""
    import time
    from pathlib import Path

    from simapf import compiled_core

    if clean and check:
        raise click.UsageError("--clean and --check do not go together")
    if clean:
        n = compiled_core.clean()
        click.echo(f"removed {n} compiled files: simapf runs pure Python" if n else "nothing compiled: simapf runs pure Python")
        return
    started = time.perf_counter()
    if check:
        try:
            files = compiled_core.translate()
        except compiled_core.CompileError as err:
            if _DEBUG and err.detail:
                click.echo(err.detail, err=True)
            _fail(err)
        click.echo(f"mypyc translates the {len(compiled_core.MODULES)} modules ({files} C files) in "
                   f"{time.perf_counter() - started:.0f} s: `simapf compile` would build them")  # fmt: skip
        return

    def stage(words: str) -> None:
        click.echo(f"simapf: compile: {_minutes(time.perf_counter() - started)}: {words}", err=True)

    try:
        compiler = compiled_core.c_compiler()
        last = compiled_core.last_build_seconds()
        click.echo(f"simapf: compile: translating {len(compiled_core.MODULES)} modules to C with mypyc, then compiling "
                   f"the C with {Path(compiler).name} -O3; "
                   + (f"the last build here took {_minutes(last)}" if last else "this takes minutes"), err=True)  # fmt: skip
        compiled_core.build(on_stage=stage)
    except compiled_core.CompileError as err:
        if _DEBUG and err.detail:
            click.echo(err.detail, err=True)
        _fail(err)
    click.echo(f"compiled {len(compiled_core.MODULES)} modules in {time.perf_counter() - started:.0f} s: "
               "simapf now runs them compiled (`simapf compile --clean` to undo)")


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


@main.command("apf-report")
@click.option("--server-concurrency", default=600, show_default=True, type=click.IntRange(min=1),
              help="--max-requests-inflight plus --max-mutating-requests-inflight.")
@click.option("--config", "config_path", type=click.Path(),
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
@click.option("--level", "level_path", required=True, type=click.Path(),
              help="LEVEL.json: name, concurrencyLimit, queues, handSize, queueLengthLimit, "
                   "requestWaitLimitSeconds (default 15, at most 60); queues 0 = Reject level.")
@click.option("--trace", "trace_path", required=True, type=click.Path(),
              help="TRACE.csv with columns id, arrival_s, flow, initial_seats, final_seats, "
                   "additional_latency_s, service_s (header required, any order).")
@click.option("--out", "out_path", required=True, type=click.Path(),
              help="OUT.csv to write: one row per trace row, in trace order.")
@click.option("--force", is_flag=True, help="Replace OUT.csv if it exists (never the level or trace file).")
def replay(level_path: str, trace_path: str, out_path: str, force: bool) -> None:
    """Replay a request trace through one priority level with a fixed concurrency limit.

    `flow` is `flowSchemaName/distinguisher` (split at the first `/`); its hash, and so its
    queues, are upstream's. OUT.csv columns: id, arrival_s, dispatched, rejected_reason,
    queue, dispatch_s, finish_s (seats released), wait_s.
    """
    from simapf.apf.replay import run_replay

    try:
        counts = run_replay(level_path, trace_path, out_path, force)
    except SimapfError as err:
        _fail(err)
    click.echo(
        f"replayed {counts['requests']} requests: {counts['dispatched']} dispatched, "
        f"{counts['rejected']} rejected -> {out_path}",
        err=True,
    )


@main.command("run")
@cache_option
@click.argument("scenario_path", required=False, type=click.Path())
@click.option("--out", "out_dir", type=click.Path(),
              help="Directory to write series (Parquet, CSV), summary.json and the overview figure to.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario field by dotted key, e.g. --set run.duration_s=120 "
                   "--set clients.controllers.count=50 (repeatable; values are YAML).")
@force_option
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON instead of text.")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Progress on stderr: a bar on a terminal, a log line every 30 s otherwise.")
@click.option("--uncertainty", "draws", default=0, type=click.IntRange(min=0, max=MAX_DRAWS), metavar="N",
              help="Also run N draws of the model's parameters and give every headline figure a 90 % interval "
                   "(parameter uncertainty and the model's validated error); 0 = one point run.")
@click.option("--workers", type=click.IntRange(min=1), help="Local worker processes for the draws (default: all cores).")
@dask_option
def run_command(scenario_path: str | None, out_dir: str | None, overrides: tuple[str, ...], force: bool,
                as_json: bool, progress: bool, draws: int, workers: int | None, dask_address: str | None) -> None:
    """Run a scenario and print what happened.

    With no SCENARIO it runs the built-in default: an informer relist storm after a network
    outage, first with informers that LIST, then again after they switch to WatchList.
    """
    from simapf.files import json_text
    from simapf.sweeps.drawn_runs import run
    from simapf.scenario import default_scenario_path, load_scenario
    from simapf.simulation.summary_text import format_summary

    try:
        _check_out(out_dir, "run", force)
        loaded = load_scenario(scenario_path or default_scenario_path(), overrides)
        if not scenario_path:
            loaded = dataclasses.replace(loaded, source="<built-in default>")
        if draws and progress:
            _say(_draws_estimate(loaded, draws, workers))
        else:
            _announce([loaded])
        result = run(loaded, progress=progress, uncertainty=draws, workers=workers, dask=dask_address)
        if out_dir:
            try:
                from simapf.outputs.rundir import write_run

                write_run(result, out_dir, force=force)
            except OSError as err:  # permissions, a full disk: the user's to fix, not a bug
                raise SimapfError(f"--out {out_dir}: cannot write: {err.strerror or err}") from None
    except SimapfError as err:
        _fail(err)
    if as_json:
        from simapf.outputs.rundir import _json_default

        click.echo(json_text(result.summary, indent=2, default=_json_default))
    else:
        click.echo(format_summary(result.summary), nl=False)
        if out_dir:
            click.echo(f"  wrote {out_dir}/: summary.json, series.parquet, series.csv, latency.csv, "
                       "client_latency.csv, priority_levels.csv, overview.png, overview.svg")  # fmt: skip


@main.command("compare")
@cache_option
@click.argument("scenario_path", required=False, type=click.Path())
@click.option("--policy", "policies", multiple=True, required=True, metavar="NAME[:k=v,...]",
              help="A LIST policy (apf.estimator.list_policy) with its list_params, e.g. upstream, "
                   "etcd-uncapped:max_list_seats=200, mypkg.mod:Class:factor=0.5. Repeat for each; the "
                   "first is the baseline of the differences.")
@click.option("--replications", default=3, show_default=True, type=click.IntRange(min=1),
              help="Runs per policy; replication r uses the same seed for every policy.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario field by dotted key, as for `simapf run` (repeatable).")
@click.option("--confidence", default=0.95, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Confidence level of the intervals on the differences.")
@click.option("--workers", type=click.IntRange(min=1), help="Local worker processes (default: all cores).")
@dask_option
@click.option("--out", "out_dir", type=click.Path(),
              help="Directory to write runs (Parquet, CSV), table.csv, differences.csv, comparison.txt and "
                   "the figure comparison.png/.svg to.")
@force_option
@click.option("--json", "as_json", is_flag=True, help="Print table and differences as JSON instead of text.")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Progress on stderr: a bar on a terminal, a log line every 30 s otherwise.")
@click.option("--uncertainty", "draws", default=0, type=click.IntRange(min=0, max=MAX_DRAWS), metavar="N",
              help="Also run every policy under N draws of the model's parameters: each policy's 90 % intervals, "
                   "and per pair of policies in how many draws one is lower than the other.")
def compare_command(scenario_path: str | None, policies: tuple[str, ...], replications: int,
                    overrides: tuple[str, ...], confidence: float, workers: int | None, dask_address: str | None,
                    out_dir: str | None, force: bool, as_json: bool, progress: bool, draws: int) -> None:  # fmt: skip
    """Run one scenario under several LIST policies, side by side.

    Every policy sees identical arrivals, sizes and jitter (common random numbers). Prints each
    policy's mean and spread over replications (peak RSS, OOM kills, throughput, rejection rate
    per level and reason, p50/p99 latency per level and verb, seats per LIST), then each
    policy's difference from the first with a paired-t confidence interval. With no SCENARIO
    it uses the built-in default. It first says how many runs that takes and about how long.
    """
    from simapf.comparison import compare
    from simapf.files import json_text
    from simapf.scenario import default_scenario_path, load_scenario

    try:
        _check_out(out_dir, "compare", force)
        loaded = load_scenario(scenario_path or default_scenario_path(), overrides)
        if not scenario_path:
            loaded = dataclasses.replace(loaded, source="<built-in default>")
        if not progress:  # quiet but for a warning when the work is large, once the backend is known good
            from simapf.sweeps.backends import choose

            choose(None, workers, dask_address)
            _announce([loaded], len(policies) * replications, 1 if dask_address else workers)
        result = compare(loaded, list(policies), replications, confidence=confidence, workers=workers,
                         dask=dask_address, progress=progress, uncertainty=draws,
                         announce=_say if progress else None)  # fmt: skip
        if out_dir:
            try:
                result.write(out_dir, force=force)
            except OSError as err:
                raise SimapfError(f"--out {out_dir}: cannot write: {err.strerror or err}") from None
    except SimapfError as err:
        _fail(err)
    if as_json:
        doc = {"policies": result.policies, "seeds": result.seeds, "confidence": confidence,
               "table": result.table.to_dict("records"), "differences": result.differences.to_dict("records")}  # fmt: skip
        if result.intervals is not None and result.wins is not None:
            doc.update(draws=draws, intervals=result.intervals.to_dict("records"), wins=result.wins.to_dict("records"),
                       contrasts=result.contrasts.to_dict("records") if result.contrasts is not None else [])
        click.echo(json_text(doc, indent=2, default=lambda x: None))
    else:
        click.echo(result.text(), nl=False)
        if out_dir:
            click.echo(f"  wrote {out_dir}/: runs.parquet, runs.csv, table.csv, differences.csv, comparison.txt, "
                       "comparison.png, comparison.svg")  # fmt: skip


@main.command("figures")
@cache_option
@click.argument("spec_or_dir", type=click.Path())
@click.option("--out", "out_dir", type=click.Path(), help="Directory to write the figures to.")
@click.option("--only", multiple=True, metavar="NAME", help="Make only this figure of the spec (repeatable).")
@click.option("--check", "check_dir", is_flag=True,
              help="SPEC_OR_DIR is a figures directory: say whether each figure is still current (exit 1 if not).")
@force_option
@budget_option
def figures_command(spec_or_dir: str, out_dir: str | None, only: tuple[str, ...], check_dir: bool, force: bool,
                    budget: str | None) -> None:  # fmt: skip
    """Make the figures of a spec (PNG, SVG, PDF with their provenance), or check a directory of them.

    simapf figures figures/kep.yaml --out docs/figures; simapf figures --check docs/figures

    It first says how many runs the figures take and about how long; with --budget it stops
    (inside a figure's runs too, those finished kept in the result cache), writes the figures
    made, and says the command (with --only) that makes the rest.
    """
    from simapf.jobs.budget import BudgetReached
    from simapf.figures import kepfigures

    try:
        if check_dir:
            if budget:
                raise SimapfError("figures: --budget is for making figures; --check reads them only")
            verdicts = kepfigures.check(spec_or_dir)
            for name, verdict in verdicts:
                click.echo(f"{name}: {verdict}")
            sys.exit(0 if all(v == "current" for _n, v in verdicts) else 1)
        if not out_dir:
            raise SimapfError("figures: --out DIR is needed to make figures (or --check DIR to check them)")
        _check_out(out_dir, "figures", force)
        try:
            files = kepfigures.make(spec_or_dir, out_dir, list(only) or None, force,
                                    log=lambda m: click.echo(m, err=True), budget=_budget(budget), announce=_say)  # fmt: skip
        except OSError as err:  # a full disk: its inputs are read as ConfigErrors, so this is a write
            raise SimapfError(f"--out {out_dir}: cannot write: {err.strerror or err}") from None
    except SimapfError as err:
        _fail(err)
    except BudgetReached as err:
        _budget_stop(err)
    click.echo(f"wrote {len(files)} files to {out_dir}/")


@main.command("export")
@click.argument("run_dir", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), required=True,
              help="openmetrics: one text file for promtool tsdb create-blocks-from openmetrics; "
                   "perfdata: clusterloader2's PerfData JSON files in a directory.")
@click.option("-o", "--output", "out", required=True, type=click.Path(),
              help="The file (openmetrics) or directory (perfdata) to write.")
@click.option("--start", "start_unix_s", type=float, default=0.0, show_default=True,
              help="Wall-clock time of the run's start, in Unix seconds, for absolute timestamps.")
@click.option("--force", is_flag=True,
              help="Replace the file -o names if it exists (openmetrics), or write into a directory that holds "
                   "files that are not simapf's (perfdata). Never the run's own files.")
def export_command(run_dir: str, fmt: str, out: str, start_unix_s: float, force: bool) -> None:
    """Export a `simapf run --out` directory for Prometheus (OpenMetrics) or perf-dash (CL2 PerfData).

    The run directory is checked first: its files against the sizes and hashes simapf recorded
    when it wrote them, and the columns export reads."""
    from simapf.outputs.export import export

    try:
        try:
            files = export(run_dir, fmt, out, start_unix_s, force)
        except OSError as err:  # permissions, a full disk: the user's to fix, not a bug
            raise SimapfError(f"-o {out}: cannot write: {err.strerror or err}") from None
    except SimapfError as err:
        _fail(err)
    click.echo(f"wrote {', '.join(str(f) for f in files)}")


@main.command("sweep")
@cache_option
@click.argument("sweep_path", type=click.Path())
@click.option("--out", "out_dir", type=click.Path(),
              help="Result directory (one Parquet file per run); rerunning with the same one resumes. "
                   "Default: the sweep file's `out`, else ./sweep-NAME.")
@click.option("--workers", type=click.IntRange(min=1),
              help="Worker processes (joblib; default all cores), or workers of a local Dask cluster.")
@dask_option
@click.option("--backend", type=click.Choice(["joblib", "dask", "serial"]),
              help="Override the sweep file's backend.kind.")
@force_option
@click.option("--allow-user-code", is_flag=True,
              help="Let Dask workers import the Python policy modules the scenarios name (your code, run there).")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Progress with ETA on stderr: a bar on a terminal, a log line every 30 s otherwise.")
@click.option("--uncertainty", "draws", type=click.IntRange(min=0, max=MAX_DRAWS), metavar="N",
              help="Also run each combination under N draws of the model's parameters, on replication 0's seed: "
                   "every headline figure's 90 % interval (overrides the file's `uncertainty`; 0 = none).")
@budget_option
def sweep_command(sweep_path: str, out_dir: str | None, workers: int | None, dask_address: str | None,
                  backend: str | None, force: bool, allow_user_code: bool, progress: bool,
                  draws: int | None, budget: str | None) -> None:  # fmt: skip
    """Run a sweep: a base scenario times the cartesian product of factors, replicated.

    Each finished run is written at once as one file of a Parquet dataset in the result
    directory; run it again after an interruption and it resumes where it stopped. Prints the
    key metrics per combination (with --uncertainty N, their intervals); load everything with
    simapf.load_sweep(DIR). It first says how many runs are left and about how long they take
    (simapf.jobs.estimate); with --budget it stops once it is spent, keeping every run finished.
    """
    from simapf.sweeps import load_sweep_spec, sweep
    from simapf.sweeps.report import format_sweep

    def run(loaded, out):
        from simapf.sweeps.backends import choose

        if not progress:  # quiet but for a warning when the work is large, once the backend is known good
            b = loaded.spec.backend
            choose(backend, workers, dask_address, b.kind, b.workers, b.address)
            runs = len(loaded.runs) + len(loaded.combinations) * loaded.spec.uncertainty  # with its parameter draws
            _announce([c.loaded for c in loaded.combinations], runs, workers or loaded.spec.backend.workers)
        return sweep(loaded, out, workers=workers, backend=backend, dask=dask_address, progress=progress, force=force,
                     allow_user_code=allow_user_code, budget=_budget(budget), announce=_say if progress else None)

    df = _resumable(lambda: load_sweep_spec(sweep_path, uncertainty=draws), "sweep", out_dir, run)
    click.echo(format_sweep(df), nl=False)


@main.command("optimize")
@cache_option
@click.argument("spec_path", type=click.Path())
@click.option("--out", "out_dir", type=click.Path(),
              help="Result directory (every run, the study, the report); rerunning with the same one resumes. "
                   "Default: the file's `out`, else ./optimize-NAME.")
@click.option("--trials", type=click.IntRange(min=1), help="Trials in all (overrides the file's `trials`).")
@click.option("--workers", type=click.IntRange(min=1),
              help="Worker processes (joblib; default all cores), or workers of a local Dask cluster.")
@dask_option
@click.option("--backend", type=click.Choice(["joblib", "dask", "serial"]),
              help="Override the file's backend.kind.")
@force_option
@click.option("--allow-user-code", is_flag=True,
              help="Let Dask workers import the Python policy modules the scenarios name (your code, run there).")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Progress over the compared settings' runs, then the trials, on stderr: a bar on a terminal, a log "
                   "line every 30 s otherwise.")
@budget_option
def optimize_command(spec_path: str, out_dir: str | None, trials: int | None, workers: int | None,
                     dask_address: str | None, backend: str | None, force: bool, allow_user_code: bool,
                     progress: bool, budget: str | None) -> None:  # fmt: skip
    """Search settings that keep constraints in every scenario and seed at the best objective.

    Optuna's TPE sampler picks the settings (any numeric or listed scenario field: a LIST
    policy's parameters, a priority level's shares); every trial runs each scenario with each
    seed, through the same backends as sweeps. Prints the best settings, the settings compared
    with (every shipped LIST policy unless the file says otherwise) and the Pareto front of
    peak memory against the objective; writes them, and pareto.png, to the result directory.
    It first says how many runs are left at most and about how long they take; with --budget it
    stops between batches of trials (and rerunning the same command goes on from there).
    """
    def load():
        from simapf.search import load_optimize_spec

        return load_optimize_spec(spec_path)

    def run(loaded, out):
        from simapf.search import check_trials, optimize
        from simapf.sweeps.backends import choose

        s = loaded.spec
        n_trials = check_trials(loaded, trials)
        compared = len(loaded.compare_with)
        if not progress:  # quiet but for a warning when the work is large, once the backend is known good
            choose(backend, workers, dask_address, s.backend.kind, s.backend.workers, s.backend.address)
            _announce(loaded.trial_scenarios(), (n_trials + compared) * len(s.seeds) * len(loaded.cases),
                      workers or s.backend.workers)  # fmt: skip
        return optimize(loaded, out, trials=trials, workers=workers, backend=backend, dask=dask_address,
                        progress=progress, force=force, allow_user_code=allow_user_code, budget=_budget(budget),
                        announce=_say if progress else None)  # fmt: skip

    result = _resumable(load, "optimize", out_dir, run)
    click.echo(result.summary_text(), nl=False)


def _resumable(load, kind: str, out_dir: str | None, run):
    """A command that writes a resumable result directory (sweep, optimize): load its file, run
    it into `out_dir` (default: the file's `out`, else ./KIND-NAME), and end in one line on an
    error, or on Ctrl-C with where the finished runs are, or with what is left and the command
    that continues when its budget is spent."""
    from pathlib import Path

    from simapf.jobs.budget import BudgetReached

    try:
        loaded = load()
        if out_dir is None:
            out_dir = str(loaded.base_dir / loaded.spec.out) if loaded.spec.out else f"{kind}-{loaded.name}"
        try:
            return run(loaded, Path(out_dir))
        except OSError as err:
            raise SimapfError(f"--out {out_dir}: cannot write: {err.strerror or err}") from None
    except SimapfError as err:
        _fail(err)
    except BudgetReached as err:
        _budget_stop(err)
    except KeyboardInterrupt:
        click.echo(f"simapf: interrupted; finished runs are in {out_dir}: run the same command to resume",
                   err=True)  # fmt: skip
        sys.exit(130)


@main.command()
@cache_option
@click.option("--data", "data_path", type=click.Path(),
              help="Measured CSV (default: calibration/list-memory-experiments.csv).")
@click.option("--out", "out_path", default="params.yaml", show_default=True, type=click.Path(),
              help="Calibration record to write (its Jacobian goes beside it as <name>.jacobian.json). An earlier "
                   "record there is replaced; any other file only with --force.")
@click.option("--start", "start_path", type=click.Path(),
              help="Record or ServerParams YAML to start from (default: the shipped calibration/params.yaml).")
@click.option("--max-iterations", default=10, show_default=True, type=click.IntRange(min=1),
              help="Most least-squares iterations (one grid of simulations each).")
@click.option("--noise-floor", type=click.FloatRange(min=0.0),
              help="Stop when the next trial step is predicted to lower the cost by less than this: the "
                   "cost's spread under parameter changes too small to matter (default: 0.01, as measured "
                   "around the shipped record; 0: never stop early).")
@click.option("--jobs", type=click.IntRange(min=1),
              help="Worker processes (joblib; default one per core), or workers of a local Dask cluster.")
@dask_option
@click.option("--backend", type=click.Choice(["joblib", "dask", "serial"]),
              help="Where the cells run: joblib worker processes (default), a Dask cluster (local unless "
                   "--dask), or this process.")
@click.option("--free", "free_keys",
              help="Comma-separated parameters to fit (default: those the start record was fitted on, else "
                   "the built-in set).")
@click.option("--loss", type=click.Choice(["soft_l1", "linear", "worst"]),
              help="Least-squares loss: soft_l1 lets a few unreachable cells cost linearly; linear weighs "
                   "the worst cells fully; worst is linear plus a penalty on any memory cell more than 40 % "
                   "off (default: the start record's, else soft_l1).")
@click.option("--report", "report", is_flag=True,
              help="Instead of fitting: regenerate docs/validation.md for --params (its figure: simapf figures figures/docs.yaml).")
@click.option("--params", "params_path", type=click.Path(),
              help="With --report: the record to report on (default: the shipped one).")
@click.option("--logo", type=click.Choice(["linear", "refit", "skip"]), default="linear", show_default=True,
              help="With --report: how to refit for leave-one-group-out.")
@click.option("--quiet", is_flag=True, help="No progress (a bar on a terminal, log lines otherwise).")
@click.option("--force", is_flag=True,
              help="Replace an existing --out (or its Jacobian) that is not a calibration record (never --data).")
@budget_option
def calibrate(data_path, out_path, start_path, max_iterations, noise_floor, jobs, dask_address, backend, free_keys,
              loss, report, params_path, logo, quiet, force, budget) -> None:  # fmt: skip
    """Fit the resource model to the measured LIST memory experiment, or report on a fit.

    Every row of the data is simulated at 1, 10 and 100 seats as the experiment ran it, and
    scipy's least_squares fits the free parameters to peak memory and CPU together. Prints
    the fit's error figures. It first says how many runs the fit takes at most and about how
    long; with --budget it stops between grid evaluations and writes the best point so far to
    OUT-STEM.unfinished.yaml (never to --out), to go on from with --start.
    """
    from simapf.jobs.budget import BudgetReached
    from simapf.calibrate.command import calibrate as run_calibrate
    from simapf.calibrate.command import check_out
    from simapf.calibrate.report import generate
    from simapf.sweeps.backends import choose

    progress = not quiet
    try:
        if report and budget:
            raise SimapfError("calibrate: --budget is for a fit; --report runs to its end (docs/validation.md "
                              "is written whole or not at all)")  # fmt: skip
        if not report:
            check_out(out_path, data_path, force, budget=bool(budget))
        where = choose(backend, jobs, dask_address)
        if report:
            summary = generate(params_path, data_path, logo_mode=logo, progress=progress, backend=where)
        else:
            keys = [k.strip() for k in free_keys.split(",") if k.strip()] if free_keys else None
            summary = run_calibrate(data_path, out_path, start_path, max_iterations, free_keys=keys,
                                    progress=progress, loss=loss, backend=where, noise_floor=noise_floor,
                                    force=force, budget=_budget(budget), announce=_say if progress else None)  # fmt: skip
    except SimapfError as err:
        _fail(err)
    except BudgetReached as err:
        _budget_stop(err)
    for key, value in summary.items():
        click.echo(f"{key}: {value}")


@main.command("import")
@click.argument("artefacts", type=click.Path())
@click.option("-o", "--output", "out", required=True, type=click.Path(),
              help="The scenario file to write (the APF objects are copied beside it, as NAME.apf.yaml).")
@click.option("--scraped-at", "scraped_at", type=float,
              help="When /metrics was scraped (Unix seconds): the counters' window runs from the apiserver's start.")
@click.option("--uptime-s", type=float,
              help="Or the apiserver's uptime when scraped, in seconds (with --scraped-at, they must agree).")
@click.option("--name", default="imported", show_default=True, help="The scenario's name.")
@click.option("--duration-s", default=300.0, show_default=True, type=click.FloatRange(min=1.0),
              help="How long the imported scenario runs.")
@click.option("--force", is_flag=True, help="Replace the scenario file (and its .apf.yaml) if they exist.")
def import_command(artefacts: str, out: str, scraped_at: float | None, uptime_s: float | None, name: str,
                   duration_s: float, force: bool) -> None:  # fmt: skip
    """Build a scenario from a real cluster's artefacts in ARTEFACTS: apf.yaml (kubectl get
    flowschemas,prioritylevelconfigurations -o yaml), metrics.txt (kubectl get --raw /metrics)
    and api-resources.txt (kubectl api-resources). Rates are averages since the apiserver started.
    Every artefact is checked before anything is written; then the scenario and its APF copy
    are written together, or neither."""
    from simapf.scenario.importer import import_cluster

    try:
        path = import_cluster(artefacts, out, scraped_at_unix_s=scraped_at, uptime_s=uptime_s, name=name,
                              duration_s=duration_s, force=force)  # fmt: skip
    except SimapfError as err:
        _fail(err)
    click.echo(f"wrote {path} (run it: simapf run {path})")


@main.command("cache")
@click.option("--clear", is_flag=True, help="Remove every entry of the result cache (nothing else in its folder).")
def cache_command(clear: bool) -> None:
    """Show the result cache (where it is, what it holds, how large it may grow), or empty it.

    Runs already computed (same scenario, seed, calibration and simapf) are read from it instead
    of computed again. SIMAPF_CACHE_DIR moves it, SIMAPF_CACHE_SIZE bounds it (least recently
    used entries go first), SIMAPF_NO_CACHE=1 or --no-cache turns it off."""
    from simapf.simulation import cache

    try:
        s = cache.settings()
    except SimapfError as err:
        _fail(err)
    store = cache.Cache(s.folder, s.max_bytes)
    if clear:
        n, size = store.clear()
        click.echo(f"removed {n} entries ({_mib(size)}) from {store.entries}")
        return
    kinds = cache.entries_by_kind(store)
    count = sum(n for n, _b in kinds.values())
    total = sum(b for _n, b in kinds.values())
    click.echo(f"result cache: {s.folder}" + (" (SIMAPF_CACHE_DIR)" if "SIMAPF_CACHE_DIR" in os.environ else ""))
    click.echo(f"  {'off: ' + s.off if s.off else 'on'}")
    click.echo(f"  {count} entries, {_mib(total)} of at most {_mib(s.max_bytes)} (SIMAPF_CACHE_SIZE)")
    for kind, (n, b) in kinds.items():
        click.echo(f"    {kind}: {n} entries, {_mib(b)} ({cache.KINDS.get(kind, '')})")


# ---------------------------------------------------------------------- the real bench

def _bench_options(command):
    for option in reversed([
        click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                     help="Override a scenario field by dotted key, as for `simapf run` (repeatable; values are YAML)."),
        click.option("--replications", default=1, show_default=True, type=click.IntRange(min=1, max=100),
                     help="Measure the scenario this many times, each from a fresh etcd and kube-apiserver."),
        click.option("--kubernetes-release", "release", metavar="1.X.Y",
                     help="The release to build and measure (default: 1.37.2 for a scenario of Kubernetes 1.37)."),
        click.option("--kube-apiserver", "kube_apiserver", type=click.Path(),
                     help="A kube-apiserver binary of your own instead of the one the bench builds."),
        click.option("--etcd", "etcd", type=click.Path(), help="An etcd binary of your own instead of the one the bench builds."),
        click.option("--progress/--no-progress", default=True, show_default=True,
                     help="Progress on stderr: each phase, and a bar while the binaries compile."),
    ]):
        command = option(command)
    return command


def _measure(scenario_path: str, overrides, replications: int, release, kube_apiserver, etcd, progress: bool):
    """The measurement `measure` and `check` share: load, build (with a bar), replicate."""
    from simapf.bench import build, measure
    from simapf.bench.run import precheck, release_for
    from simapf.progress import progress_bar
    from simapf.scenario import load_scenario

    loaded = load_scenario(scenario_path, overrides)
    precheck(loaded, release)
    rel = release_for(loaded, release)
    bar = None

    def on_package(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = progress_bar(total, "compiling", "packages", enabled=progress)
        bar.update(done - bar.n)

    if progress and build.needs_build(rel, kube_apiserver, etcd):
        took = build.last_build_seconds(rel) or build.FIRST_BUILD_S
        _say(f"simapf: building the bench's binaries for Kubernetes {rel} into {build.bench_dir()} "
             f"(about {_minutes(took)}; once per release)")  # fmt: skip
    each = loaded.scenario.run.duration_s + 25
    if progress:
        _say(f"simapf: measuring {loaded.scenario.name}: {replications} replication(s), about {_minutes(each * replications)} "
             "(start-up, inventory and the run's duration each)")  # fmt: skip
    try:
        return measure(loaded, replications, rel, kube_apiserver, etcd, say=_say if progress else (lambda _: None),
                       on_package=on_package)  # fmt: skip
    finally:
        if bar is not None:
            bar.close()


@main.command("measure")
@click.argument("scenario_path", type=click.Path())
@click.option("--out", "out_dir", type=click.Path(),
              help="Directory to write what `simapf run --out` writes, plus the heap profile at the peak, each "
                   "client's attempts and the processes' logs (with --replications: rep-1 ... rep-R and replications.json).")
@_bench_options
@force_option
@click.option("--json", "as_json", is_flag=True, help="Print the summary (of the first replication) as JSON.")
def measure_command(scenario_path: str, out_dir: str | None, overrides: tuple[str, ...], replications: int,
                    release: str | None, kube_apiserver: str | None, etcd: str | None, progress: bool, force: bool,
                    as_json: bool) -> None:  # fmt: skip
    """Run SCENARIO on a real kube-apiserver and etcd, built from upstream's Go modules.

    The same scenario file as `simapf run`: the apiserver gets its cores as a CPU quota and
    GOMAXPROCS, its memory limit as a cgroup limit (the kernel OOM-kills at it), its GOGC,
    GOMEMLIMIT, in-flight limits, feature gates and watch-cache settings; the inventory is
    created through the API; the clients are client-go's, one process each. Needs Go, root (for
    the cgroups) and Linux. A field the bench cannot reproduce is named before anything starts;
    everything started is stopped on every way out."""
    from simapf.files import json_text
    from simapf.bench import write
    from simapf.outputs.rundir import _json_default
    from simapf.simulation.summary_text import format_summary

    try:
        _check_out(out_dir, "run" if replications == 1 else "measure", force)
        m = _measure(scenario_path, overrides, replications, release, kube_apiserver, etcd, progress)
        if out_dir:
            try:
                write(m, out_dir, force=force)
            except OSError as err:
                raise SimapfError(f"--out {out_dir}: cannot write: {err.strerror or err}") from None
    except SimapfError as err:
        _fail(err)
    if as_json:
        click.echo(json_text(m.results[0].summary, indent=2, default=_json_default))
        return
    for k, r in enumerate(m.results, start=1):
        if len(m.results) > 1:
            click.echo(f"replication {k}:")
        click.echo(format_summary(r.summary), nl=False)
    if len(m.results) > 1:
        click.echo("\n  over the replications (median, min to max):")
        for key, got in m.spread().items():
            if key.endswith("_bytes"):
                click.echo(f"  {key:<44} {got['median'] / 1e6:,.0f} MB ({got['min'] / 1e6:,.0f} to {got['max'] / 1e6:,.0f})")
    if out_dir:
        click.echo(f"  wrote {out_dir}/")


@main.command("check")
@click.argument("scenario_path", type=click.Path())
@_bench_options
@click.option("--uncertainty", "draws", default=20, show_default=True, type=click.IntRange(min=0, max=MAX_DRAWS),
              metavar="N", help="Parameter draws for the prediction's 90 % intervals (0: the point alone).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def check_command(scenario_path: str, overrides: tuple[str, ...], replications: int, release: str | None,
                  kube_apiserver: str | None, etcd: str | None, progress: bool, draws: int, as_json: bool) -> None:  # fmt: skip
    """Measure SCENARIO on the real bench and predict it with the model: each headline figure
    side by side, measured (median and range over the replications) and predicted (with its
    90 % interval), and whether the interval holds the measurement."""
    from simapf.bench.check import rows, table
    from simapf.files import json_text
    from simapf.scenario import load_scenario
    from simapf.sweeps.drawn_runs import run

    try:
        m = _measure(scenario_path, overrides, replications, release, kube_apiserver, etcd, progress)
        predicted = run(load_scenario(scenario_path, overrides), progress=progress, uncertainty=draws)
    except SimapfError as err:
        _fail(err)
    found = rows(m, predicted.typed)
    if as_json:
        click.echo(json_text([r.as_dict() for r in found], indent=1))
        return
    click.echo(f"simapf check: {m.loaded.scenario.name} ({m.loaded.source}), measured on "
               f"{_measured_release(m.results[0].typed)}, {len(m.results)} replication(s); "
               f"predicted with {draws} parameter draws")  # fmt: skip
    click.echo(table(found, len(m.results)), nl=False)


def _measured_release(summary: Summary) -> str:
    """The kube-apiserver a measured run ran on, as its build named it."""
    return summary.bench.versions.get("kube-apiserver", summary.bench.release) if summary.bench else "?"


def _mib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


if __name__ == "__main__":
    main()
