"""The documents' numbers from the command line: check them, or rewrite them from runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python tests/docnumbers`: its package

from docnumbers.registry import Registry, RegistryError, documents, load_pending, rewrite  # noqa: E402
from docnumbers.sources import Runs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tests/docnumbers", description=__doc__)
    ap.add_argument("--fast", action="store_true", help="leave out the runs marked slow")
    ap.add_argument("--write", action="store_true", help="rewrite every number and block a run gives")
    ap.add_argument("--todo", nargs="?", const="", metavar="DOC", help="list the numbers nothing accounts for")
    args = ap.parse_args(argv)
    try:
        registry = Registry.load()
    except RegistryError as e:
        print(f"python tests/docnumbers: error: {e}", file=sys.stderr)
        return 2
    docs = documents(registry)
    if args.todo is not None:
        problems = [p for d in docs if args.todo in d.rel for p in d.unaccounted()]
        print("\n".join(map(str, problems)))
        print(f"{len(problems)} numbers unaccounted for", file=sys.stderr)
        return 1 if problems else 0
    allowed = {n for n, r in registry.runs.items() if not r.slow} if args.fast else None
    runs = Runs(registry.runs, allowed)
    if args.write:
        for name in rewrite(docs, runs):
            print(f"wrote {name}", file=sys.stderr)
        return 0
    pending = load_pending()  # their unaccounted numbers are counted, not listed: see --todo
    problems = [p for d in docs if d.rel not in pending for p in d.unaccounted()]
    for d in docs:
        problems += d.disagreements(runs)[0]
    print("\n".join(map(str, problems)))
    print(f"{len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
