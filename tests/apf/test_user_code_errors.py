"""A LIST policy of the user's own that raises or returns what is not seats (issue 47).

The bad-command corpus (tests/data/bad-commands/policy-code.yaml) checks the one line and the
untouched folder for each kind of failure and command; here is what it cannot say: the
traceback behind `--debug`, in this process and from a worker process, the error surviving a
pickle, the check's verdict on every kind of return value, and that the shipped policies are
called as before while a valid policy of the user's runs exactly as a shipped one.
"""

from __future__ import annotations

import math
import pickle
import sys
import textwrap

import pytest
import yaml
from click.testing import CliRunner

import simapf
from simapf.apf.estimators import EstimationContext, WorkEstimator, initial_only, list_policy_names
from simapf.apf.estimators.base import EstimatorConfigError
from simapf.apf.estimators.registry import SHIPPED, make_list_policy
from simapf.apf.estimators.usercode import not_seats
from simapf.apf.types import RequestAttributes, WorkEstimate
from simapf.cli import main
from simapf.errors import ConfigError, UserCodeError, users_traceback

RAISING = """\
from simapf.apf.estimators import initial_only


def seats_of(stats):
    return 100 // stats.average_object_size_bytes


class Policy:
    def estimate(self, attrs, ctx, from_cache):
        return initial_only(seats_of(Empty()))


class Empty:
    average_object_size_bytes = 0
"""


def _scenario(policy: str, **estimator) -> dict:
    return {
        "name": "t", "run": {"duration_s": 5},
        "apf": {"estimator": {"list_policy": policy, **estimator}},
        "resources": [{"name": "configmaps", "count": 10, "object_size": {"mean_bytes": 1024}}],
        "clients": [{"name": "l", "kind": "open_loop", "identity": {"user": "u"}, "rate_per_s": 5,
                     "request": {"verb": "list", "resource": "configmaps"}}],
    }  # fmt: skip


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Write a module of the user's into a folder on sys.path; forgotten again afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))  # worker processes start with this sys.path too
    written = []

    def write(name: str, text: str):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        written.append(name)
        return tmp_path / f"{name}.py"

    yield write
    for name in written:
        sys.modules.pop(name, None)


def _invoke(args: list[str]):
    return CliRunner().invoke(main, args)


def test_the_line_names_the_users_file_line_policy_and_call(user_module, tmp_path):
    path = user_module("uc_raising", RAISING)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(_scenario("uc_raising:Policy")))
    res = _invoke(["run", str(scenario), "--no-progress"])
    assert res.exit_code == 2
    # The innermost frame in their module: the helper's line, not simapf's nor the caller's.
    assert res.stderr == (f"simapf: error: {path}:5: LIST policy 'uc_raising:Policy' estimate raised "
                          "ZeroDivisionError: integer division or modulo by zero\n")  # fmt: skip


def test_debug_shows_the_users_traceback_and_still_exits_2(user_module, tmp_path):
    path = user_module("uc_debug", RAISING)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(_scenario("uc_debug:Policy")))
    plain = _invoke(["run", str(scenario), "--no-progress"])
    debug = _invoke(["--debug", "run", str(scenario), "--no-progress"])
    assert debug.exit_code == 2
    first, rest = debug.stderr.split("\n", 1)
    assert first == plain.stderr.rstrip("\n")
    assert rest.startswith("Traceback (most recent call last):\n")
    # It starts in the user's code, not in simapf's wrapper, and ends there too.
    frames = [line for line in rest.splitlines() if line.startswith("  File ")]
    assert frames == [f'  File "{path}", line 10, in estimate', f'  File "{path}", line 5, in seats_of']
    assert rest.rstrip().endswith("ZeroDivisionError: integer division or modulo by zero")


def test_debug_over_a_worker_process_shows_the_traceback_carried_back(user_module, tmp_path):
    path = user_module("uc_worker", RAISING)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "w", "base": _scenario("uc_worker:Policy"),
                                     "factors": {"clients.l.rate_per_s": [4, 5]}}))  # fmt: skip
    out = tmp_path / "out"
    res = _invoke(["--debug", "sweep", str(sweep), "--workers", "2", "--out", str(out), "--no-progress"])
    assert res.exit_code == 2
    first, rest = res.stderr.split("\n", 1)
    assert first == (f"simapf: error: {path}:5: LIST policy 'uc_worker:Policy' estimate raised "
                     "ZeroDivisionError: integer division or modulo by zero")  # fmt: skip
    assert rest.startswith("Traceback") and f'File "{path}", line 5, in seats_of' in rest
    assert "_RemoteTraceback" not in rest  # the user's traceback, not the worker pool's
    assert not out.exists()  # no run finished: the directory it made is gone


def test_the_error_survives_a_pickle_with_its_traceback():
    try:
        try:
            {}["seats"]
        except KeyError as e:
            raise UserCodeError("mine.py:3: LIST policy 'mine:Policy' estimate raised KeyError: 'seats'") from e
    except UserCodeError as err:
        here = err
    back = pickle.loads(pickle.dumps(here))
    assert type(back) is UserCodeError and str(back) == str(here)
    assert users_traceback(back) == users_traceback(here) and "KeyError: 'seats'" in users_traceback(back)
    # A worker pool chains its own traceback onto what it re-raises: the carried text wins, and
    # an error with no user's exception behind it shows none.
    back.__cause__ = RuntimeError("the pool's traceback")
    assert "KeyError: 'seats'" in users_traceback(back)
    plain = pickle.loads(pickle.dumps(ConfigError("s.yaml: run.duration_s: must be > 0")))
    plain.__cause__ = RuntimeError("the pool's traceback")
    assert users_traceback(plain) is None


def _ctx() -> EstimationContext:
    return EstimationContext(pl_max_seats=10)


def _list() -> RequestAttributes:
    return RequestAttributes(user="u", verb="list", resource="configmaps")


class _Returns:
    value = None

    def estimate(self, attrs, ctx, from_cache):
        return self.value


@pytest.mark.parametrize("value", [WorkEstimate(1), WorkEstimate(3, 7, 5_000_000), initial_only(2), WorkEstimate(10**12)])
def test_valid_seats_pass_through_unchanged(value):
    policy = _Returns()
    policy.value = value
    assert WorkEstimator(policy).estimate(_list(), _ctx()) is value


@pytest.mark.parametrize(("value", "said"), [
    (3, "3 (int), not a WorkEstimate"),
    (None, "None (NoneType), not a WorkEstimate"),
    ("2", "'2' (str), not a WorkEstimate"),
    ([1], "[1] (list), not a WorkEstimate"),
    ((True,), "initial_seats True (bool): it must be an integer >= 1"),
    ((2.0,), "initial_seats 2.0 (float): it must be an integer >= 1"),
    ((math.nan,), "initial_seats nan (float)"),
    ((math.inf,), "initial_seats inf (float)"),
    ((0,), "initial_seats 0 (int): it must be an integer >= 1"),
    ((-1,), "initial_seats -1 (int)"),
    ((1, -2), "final_seats -2 (int): it must be an integer >= 0"),
    ((1, 2, -1), "additional_latency_ns -1 (int): it must be an integer >= 0"),
    ((1, 2, 0.5), "additional_latency_ns 0.5 (float)"),
])  # fmt: skip
def test_what_is_not_seats_is_refused_naming_the_value(value, said):
    if isinstance(value, tuple):  # the fields of a WorkEstimate
        try:
            value = WorkEstimate(*value)
        except TypeError:
            pytest.skip("the compiled core's WorkEstimate refuses these fields itself")
    assert said in not_seats(value)
    policy = _Returns()
    policy.value = value
    with pytest.raises(UserCodeError, match=r"test_user_code_errors.py:\d+: LIST policy '[\w.]+:_Returns' "
                                            r"estimate returned "):  # fmt: skip
        WorkEstimator(policy).estimate(_list(), _ctx())


def test_a_call_that_fails_by_its_signature_names_the_def_and_the_expected_call(user_module):
    path = user_module("uc_signature", """\
        from simapf.apf.estimators import initial_only

        class Policy:
            def estimate(self, attrs, ctx):
                return initial_only(1)
        """)
    we = WorkEstimator("uc_signature:Policy")
    with pytest.raises(UserCodeError) as caught:
        we.estimate(_list(), _ctx())
    assert str(caught.value).startswith(f"{path}:4: LIST policy 'uc_signature:Policy' estimate raised TypeError: ")
    assert str(caught.value).endswith("(simapf calls estimate(attrs, ctx, from_cache))")


def test_init_errors_are_the_users_but_a_config_error_of_theirs_stays_one(user_module):
    path = user_module("uc_init", """\
        from simapf.apf.estimators import EstimatorConfigError

        class Policy:
            def __init__(self, factor=1.0, strict=False):
                if strict and factor > 1:
                    raise EstimatorConfigError(f"LIST policy 'uc_init:Policy': factor must be <= 1, got {factor}")
                self.per_seat = 100 / factor

            def estimate(self, attrs, ctx, from_cache):
                raise NotImplementedError
        """)
    with pytest.raises(UserCodeError, match=rf"^{path}:7: LIST policy 'uc_init:Policy' __init__ raised "
                                            "ZeroDivisionError: float division by zero$"):  # fmt: skip
        make_list_policy("uc_init:Policy", factor=0.0)
    with pytest.raises(EstimatorConfigError, match="factor must be <= 1, got 2"):
        make_list_policy("uc_init:Policy", factor=2, strict=True)
    # Through a scenario, the config error keeps its field path; the user's exception does not
    # get one (its file and line say where to look).
    with pytest.raises(ConfigError, match=r"apf.estimator.list_params: .*factor must be <= 1"):
        simapf.run(_scenario("uc_init:Policy", list_params={"factor": 2, "strict": True}))
    with pytest.raises(UserCodeError, match=rf"^{path}:7: "):
        simapf.run(_scenario("uc_init:Policy", list_params={"factor": 0}))


def test_an_instance_or_class_given_from_python_is_named_by_its_module_and_class():
    class Broken:
        def estimate(self, attrs, ctx, from_cache):
            raise ValueError("no")

    for given in (Broken, Broken()):
        with pytest.raises(UserCodeError, match=r"LIST policy '[\w.]+:test_an_instance_or_class_given_from_python_is_"
                                                r"named_by_its_module_and_class.<locals>.Broken' estimate raised "
                                                r"ValueError: no$"):  # fmt: skip
            WorkEstimator(given).estimate(_list(), _ctx())


def test_an_unprintable_exception_is_named_by_its_type():
    class Odd(Exception):
        def __str__(self):
            raise RuntimeError("cannot say")

    class Policy:
        def estimate(self, attrs, ctx, from_cache):
            raise Odd()

    with pytest.raises(UserCodeError, match=r" estimate raised Odd$"):
        WorkEstimator(Policy).estimate(_list(), _ctx())


@pytest.mark.parametrize("name", list_policy_names())
def test_the_shipped_policies_are_called_directly(name):
    params = {"seats": 3} if name == "constant" else {}
    we = WorkEstimator(name, list_params=params)
    assert type(we.list_policy) in SHIPPED
    assert we._list_estimate == we.list_policy.estimate  # their own bound method: no check, no wrapper


def test_a_valid_policy_of_the_users_runs_exactly_as_the_shipped_one(user_module):
    # The check lets a valid estimate through untouched: a subclass of `constant` (the user's
    # code, so checked) gives the very same run as `constant` itself.
    user_module("uc_same", """\
        from simapf.apf.estimators import ConstantListPolicy

        class Same(ConstantListPolicy):
            pass
        """)
    from simapf.sweeps.measure import measure

    shipped = measure(simapf.load_scenario(_scenario("constant", list_params={"seats": 3})))
    mine = measure(simapf.load_scenario(_scenario("uc_same:Same", list_params={"seats": 3})))
    assert WorkEstimator("uc_same:Same", list_params={"seats": 3})._list_estimate.__name__ == "estimate_checked"
    assert mine["lists_dispatched"] > 0 and mine["seats_per_list_mean"] == 3
    assert {k: v for k, v in mine.items() if k != "wall_s"} == {k: v for k, v in shipped.items() if k != "wall_s"}


def test_a_sweep_keeps_the_runs_that_finished_and_resumes_after_the_fix(user_module, tmp_path):
    # A run that failed on the user's code is not a finished run: the runs that did finish stay
    # in the result directory (as after an interruption) and a rerun does only the rest.
    path = user_module("uc_later", """\
        class Policy:
            def estimate(self, attrs, ctx, from_cache):
                raise RuntimeError("not yet")
        """)
    spec = {"name": "later", "base": _scenario("upstream"),
            "factors": {"apf.estimator.list_policy": ["upstream", "uc_later:Policy"]}}
    out = tmp_path / "out"
    with pytest.raises(UserCodeError, match=rf"^{path}:3: LIST policy 'uc_later:Policy' estimate raised "
                                            "RuntimeError: not yet$"):  # fmt: skip
        simapf.sweep(spec, out, backend="serial")
    assert len(list(out.glob("run-*.parquet"))) == 1
    path.write_text("from simapf.apf.estimators import initial_only\n\nclass Policy:\n"
                    "    def estimate(self, attrs, ctx, from_cache):\n        return initial_only(2)\n")
    sys.modules.pop("uc_later", None)
    df = simapf.sweep(spec, out, backend="serial")
    assert df.attrs["status"]["skipped"] == 1 and df.attrs["status"]["ran"] == 1
    assert len(df) == 2
