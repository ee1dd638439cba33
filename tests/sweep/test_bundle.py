"""A run task carries the files its scenario refers to, so a worker without the user's files (a
Dask worker on another machine) runs it the same."""

import shutil

import simapf
from simapf.sweeps import load_sweep_spec
from simapf.sweeps.measure import bundle, execute
from simapf.sweeps.runner import task_for

from sweephelp import SMALL, write_sweep

OBJECTS = """\
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: lists}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 10
    limitResponse: {type: Queue, queuing: {queues: 16, handSize: 4, queueLengthLimit: 50}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: listers}
spec:
  priorityLevelConfiguration: {name: lists}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: Group, group: {name: "system:authenticated"}}]
    resourceRules: [{verbs: [list], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}]
"""


def test_referenced_files_travel_with_the_task(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "conf").mkdir(parents=True)
    (project / "conf" / "objects.yaml").write_text(OBJECTS)
    scenario = dict(SMALL, apf={"config": "conf/objects.yaml"})
    sweep = {"base": "scenario.yaml", "factors": {"clients.listers.rate_per_s": [4, 8]}, "set": {"run.duration_s": 10}}
    path = write_sweep(project, sweep, scenario)

    loaded = load_sweep_spec(path)
    run = loaded.runs[1]
    task = task_for(loaded, run, bundle(loaded.combination(run).loaded))
    assert [name for name, _ in task.files] == ["bundle/0-objects.yaml"]
    expected = simapf.sweep(path, backend="serial").iloc[1].drop("wall_s")
    assert expected["requests/lists"] > 0  # the cluster's own APF objects were used

    # On a machine without the project: another working directory, the files gone.
    shutil.rmtree(project)
    monkeypatch.chdir(tmp_path)
    row = execute(task)
    assert row["requests/lists"] == expected["requests/lists"]
    assert row["peak_rss_bytes"] == expected["peak_rss_bytes"]
