"""The bench's binaries: kube-apiserver, etcd and simapf's client-go load generator, built from
upstream's Go modules at one Kubernetes release, into the user's cache.

The Go module shipped in `simapf/bench/go` requires `k8s.io/kubernetes` at the release and
replaces each of its staging modules (its go.mod says `k8s.io/api => ./staging/src/k8s.io/api`,
and so on) with the same module at the matching `v0.X.Y`, as the Go module proxy serves them;
the etcd server comes at the version that release's go.mod pins, so the apiserver's etcd client
and the server speak the same protocol (RangeStream from etcd 3.7). The module's go.mod and
go.sum are committed for the default release; another release's are generated here from its
go.mod (`replaces_for`) and tidied. `/version` says the release: the build stamps
k8s.io/component-base/version.

Where: `$SIMAPF_BENCH_DIR`, else `$XDG_CACHE_HOME/simapf-bench`, else `~/.cache/simapf-bench`;
one folder per release, with the binaries in `bin/` and what made them in `build.json`. Go's own
module and build caches are Go's (GOMODCACHE, GOCACHE), so a second release builds faster.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from simapf.errors import SimapfError

DEFAULT_RELEASE = "1.37.2"
GO_SOURCES = Path(__file__).resolve().parent / "go"
MODULE = "simapf.local/bench"
KUBERNETES = "k8s.io/kubernetes"
APISERVER_PACKAGE = "k8s.io/kubernetes/cmd/kube-apiserver"
# Each binary: its Go package, in our module.
PACKAGES = {"kube-apiserver": APISERVER_PACKAGE, "etcd": "./cmd/etcd", "simapf-loadgen": "./cmd/simapf-loadgen"}
# A first build's wall time on a 2-core machine with an empty Go cache (docs/benchmarks.md, "The
# real bench"): the estimate before this machine has built once.
FIRST_BUILD_S = 480.0


class BuildError(SimapfError):
    """The bench's binaries could not be built: `str()` is one line, `detail` Go's output."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    etcd: Path
    loadgen: Path
    release: str
    versions: dict[str, str]  # what each binary says of itself, and Go's version


def bench_dir() -> Path:
    folder = os.environ.get("SIMAPF_BENCH_DIR") or str(Path(os.environ.get("XDG_CACHE_HOME") or
                                                            Path.home() / ".cache") / "simapf-bench")  # fmt: skip
    return Path(folder).expanduser()


def release_text(release: str) -> str:
    """`1.37.2` from `v1.37.2` or `1.37.2`; a release must be MAJOR.MINOR.PATCH."""
    text = release.strip().removeprefix("v")
    if not re.fullmatch(r"1\.\d+\.\d+", text):
        raise BuildError(f"--kubernetes-release: {release!r}: give a release as 1.37.2")
    return text


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError("the bench builds kube-apiserver and etcd with Go: install Go (https://go.dev/dl/) and put it on PATH")
    return go


def _run(argv: list[str], cwd: Path, what: str, env: dict[str, str] | None = None,
         on_line: Callable[[str], None] | None = None) -> str:  # fmt: skip
    """Run a Go command; its output, or BuildError naming `what` with the output's last lines."""
    full_env = {**os.environ, "GOFLAGS": "-mod=mod", **(env or {})}
    proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line)
            if on_line is not None:
                on_line(line.rstrip("\n"))
        proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    output = "".join(lines)
    if proc.returncode != 0:
        tail = [line for line in lines if line.strip()][-1:] or ["(no output)"]
        raise BuildError(f"{what} failed: {tail[0].strip()}", output)
    return output


def replaces_for(kubernetes_gomod: str, release: str) -> list[tuple[str, str]]:
    """(module, version) for every staging module a k8s.io/kubernetes go.mod replaces with a
    folder of its own: the same module at v0.MINOR.PATCH."""
    staged = re.findall(r"^\s*(k8s\.io/[\w.\-/]+)\s+=>\s+\./staging/", kubernetes_gomod, re.M)
    if not staged:
        raise BuildError(f"k8s.io/kubernetes v{release}: its go.mod replaces no staging module; is it a release?")
    minor_patch = release.split(".", 1)[1]
    return [(module, f"v0.{minor_patch}") for module in staged]


def gomod_text(release: str, kubernetes_gomod: str) -> str:
    """Our module's go.mod for a release, before `go mod tidy`."""
    go_line = re.search(r"^go\s+(\S+)", kubernetes_gomod, re.M)
    replaces = "".join(f"\t{m} => {m} {v}\n" for m, v in replaces_for(kubernetes_gomod, release))
    return (f"module {MODULE}\n\ngo {go_line[1] if go_line else '1.26.0'}\n\nrequire {KUBERNETES} v{release}\n\n"
            f"replace (\n{replaces})\n")  # fmt: skip


def shipped_release() -> str:
    """The release the committed go.mod pins."""
    found = re.search(r"^require\s+k8s\.io/kubernetes\s+v(\S+)", (GO_SOURCES / "go.mod").read_text(), re.M)
    return found[1] if found else DEFAULT_RELEASE


def sources_digest(name: str) -> str:
    """Of what one binary is built from, of simapf's Go module: the module's go.mod and go.sum,
    and its own command's folder (the apiserver's is upstream's, fixed by go.mod). A change
    rebuilds that binary only."""
    h = hashlib.sha256()
    command = GO_SOURCES / PACKAGES[name].removeprefix("./") if PACKAGES[name].startswith("./") else None
    paths = [GO_SOURCES / "go.mod", GO_SOURCES / "go.sum", GO_SOURCES / "tools.go"]
    if command is not None:
        paths += sorted(p for p in command.rglob("*") if p.is_file())
    for path in paths:
        h.update(path.relative_to(GO_SOURCES).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _prepare_module(release: str, src: Path, go: str, progress: Callable[[str], None]) -> None:
    """The Go module for `release` in `src`: our commands, and go.mod/go.sum for the release."""
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(GO_SOURCES, src)
    if release == shipped_release():
        return
    progress(f"reading k8s.io/kubernetes v{release}'s go.mod from the Go module proxy")
    found = _run([go, "mod", "download", "-json", f"{KUBERNETES}@v{release}"], src, f"go mod download {KUBERNETES}@v{release}")
    gomod = Path(json.loads(found)["GoMod"]).read_text()
    (src / "go.mod").write_text(gomod_text(release, gomod))
    (src / "go.sum").unlink(missing_ok=True)
    progress("go mod tidy (the release's modules)")
    _run([go, "mod", "tidy"], src, "go mod tidy")


def _ldflags(release: str) -> str:
    major, minor, _ = release.split(".")
    base = "k8s.io/component-base/version"
    return " ".join([f"-X {base}.gitVersion=v{release}", f"-X {base}.gitMajor={major}",
                     f"-X {base}.gitMinor={minor}", f"-X {base}.gitTreeState=clean"])  # fmt: skip


def _version_of(binary: Path) -> str:
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        raise BuildError(f"{binary}: cannot run it: {err}") from None
    text = (out.stdout or out.stderr).strip()
    if out.returncode != 0 or not text:
        raise BuildError(f"{binary}: `--version` failed (exit {out.returncode})")
    first = text.splitlines()[0]
    # "Kubernetes v1.37.2", "etcd Version: 3.7.0": the version alone
    found = re.search(r"v?\d+\.\d+\.\d+\S*", first)
    return found[0] if found else first


def last_build_seconds(release: str) -> float | None:
    record = bench_dir() / f"k8s-v{release}" / "build.json"
    try:
        return float(json.loads(record.read_text())["build_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _record(folder: Path) -> dict[str, Any]:
    try:
        record = json.loads((folder / "build.json").read_text())
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        return {}


def _current(folder: Path, record: dict[str, Any], name: str) -> bool:
    built = record.get("binaries", {}).get(name)
    return isinstance(built, dict) and built.get("sources_sha256") == sources_digest(name) and (folder / "bin" / name).is_file()


def build(release: str = DEFAULT_RELEASE, needed: tuple[str, ...] = tuple(PACKAGES),
          progress: Callable[[str], None] = lambda _: None,
          on_package: Callable[[int, int], None] | None = None) -> Path:  # fmt: skip
    """Build the `needed` binaries for `release` unless current ones are there; their folder.
    `progress` hears each phase; `on_package(done, total)` each Go package compiled."""
    release = release_text(release)
    folder = bench_dir() / f"k8s-v{release}"
    record = _record(folder)
    missing = [name for name in needed if not _current(folder, record, name)]
    if not missing:
        return folder / "bin"
    go = _go()
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="build-", dir=folder) as tmp:
        src = Path(tmp) / "src"
        _prepare_module(release, src, go, progress)
        progress("downloading modules (go mod download)")
        _run([go, "mod", "download"], src, "go mod download")
        packages = [PACKAGES[name] for name in missing]
        listed = _run([go, "list", "-deps", *packages], src, "go list").split()
        total, done = len(listed), 0

        def package_built(line: str) -> None:
            nonlocal done
            if line and not line.startswith(("#", "go:")) and " " not in line:
                done += 1
                if on_package is not None:
                    on_package(min(done, total), total)

        progress(f"compiling {total:,} packages (go build; a first build takes minutes)")
        staging = Path(tmp) / "bin"
        staging.mkdir()
        _run([go, "build", "-v", "-trimpath", "-ldflags", _ldflags(release), "-o", str(staging) + "/", *packages],
             src, "go build", on_line=package_built)  # fmt: skip
        go_version = _run([go, "version"], src, "go version").strip()
        binaries = dict(record.get("binaries", {}))
        bin_dir = folder / "bin"
        bin_dir.mkdir(exist_ok=True)
        for name in missing:
            version = _version_of(staging / name) if name != "simapf-loadgen" else MODULE
            os.replace(staging / name, bin_dir / name)
            binaries[name] = {"sources_sha256": sources_digest(name), "version": version, "go": go_version}
    build_s = round(time.monotonic() - started, 1)
    record = {"release": release, "binaries": binaries,
              # what the next full build announces: the last build that compiled the apiserver
              "build_s": build_s if "kube-apiserver" in missing else record.get("build_s"),
              "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    tmp_record = folder / "build.json.tmp"
    tmp_record.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp_record, folder / "build.json")
    return folder / "bin"


def needs_build(release: str, kube_apiserver: str | Path | None = None, etcd: str | Path | None = None) -> bool:
    """Whether `binaries` would compile anything (the apiserver or etcd, not given, or the load generator)."""
    folder = bench_dir() / f"k8s-v{release_text(release)}"
    record = _record(folder)
    needed = [n for n, given in (("kube-apiserver", kube_apiserver), ("etcd", etcd), ("simapf-loadgen", None)) if given is None]
    return not all(_current(folder, record, name) for name in needed)


def binaries(release: str = DEFAULT_RELEASE, kube_apiserver: str | Path | None = None, etcd: str | Path | None = None,
             progress: Callable[[str], None] = lambda _: None,
             on_package: Callable[[int, int], None] | None = None) -> Binaries:  # fmt: skip
    """The binaries a measurement runs: built for `release` unless the user gives their own
    kube-apiserver and etcd (the load generator is always simapf's, built here)."""
    release = release_text(release)
    given = {"kube-apiserver": kube_apiserver, "etcd": etcd}
    paths: dict[str, Path] = {}
    for name, path_text in given.items():
        if path_text is not None:
            path = Path(path_text).expanduser()
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise BuildError(f"--{name}: {path_text}: not an executable file")
            paths[name] = path.resolve()
    needed = tuple(name for name in PACKAGES if name not in paths)
    bin_dir = build(release, needed, progress, on_package)
    built = _record(bin_dir.parent).get("binaries", {})
    versions = {name: built[name]["version"] for name in needed}
    versions["go"] = built[needed[0]]["go"]
    for name, path in paths.items():
        versions[name] = _version_of(path)
    paths = {name: paths.get(name, bin_dir / name) for name in PACKAGES}
    return Binaries(paths["kube-apiserver"], paths["etcd"], paths["simapf-loadgen"], release, versions)
