"""Progress on stderr: a tqdm bar on a terminal (or in a notebook), else a plain log line every
`LOG_INTERVAL_S`, so a sweep or a calibration under CI is not silent for minutes and its log
holds no carriage returns.

`progress_bar` returns an object with the part of tqdm's interface simapf uses: `update(n)`,
`n`, `set_postfix(**kw)`, `close()`.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, TextIO

LOG_INTERVAL_S = 30.0  # between two log lines when stderr is not a terminal


class LogLines:
    """Progress as lines: `simapf: NAME: 12/216 runs (6 %), 41 s, about 11 min left`."""

    def __init__(self, total: float | None, desc: str, unit: str, initial: float = 0,
                 interval_s: float | None = None, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.total = total
        self.desc = desc
        self.unit = unit
        self.n = initial
        self.initial = initial
        self.interval_s = LOG_INTERVAL_S if interval_s is None else interval_s
        self.stream = stream
        self.clock = clock
        self.started = self.last = clock()
        self.postfix = ""
        self.lines = 0  # written so far: a task shorter than the interval stays silent

    def _line(self, now: float, ending: str = "") -> str:
        elapsed = now - self.started
        n = f"{self.n:,.0f}"
        if self.total:
            text = f"{n}/{self.total:,.0f} {self.unit} ({100 * self.n / self.total:.0f} %), {_duration(elapsed)}"
            pace = (self.n - self.initial) / elapsed if elapsed > 0 else 0.0
            if not ending and pace > 0 and self.n < self.total:
                text += f", about {_duration((self.total - self.n) / pace)} left"
        else:
            text = f"{n} {self.unit}, {_duration(elapsed)}"
        if self.postfix:
            text += f" [{self.postfix}]"
        return f"simapf: {self.desc}: {text}{f' ({ending})' if ending else ''}"

    def _emit(self, line: str) -> None:
        self.lines += 1
        print(line, file=self.stream or sys.stderr, flush=True)

    def update(self, n: float = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.interval_s:
            self.last = now
            self._emit(self._line(now))

    def set_postfix(self, **kw: Any) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in kw.items())

    def close(self) -> None:
        """The last line, if any was written: "(done)" when the work finished, "(interrupted)"
        when it did not (an exception on its way out, or fewer than the total)."""
        if self.lines:
            self._emit(self._line(self.clock(), "done" if self.finished() else "interrupted"))

    def finished(self) -> bool:
        # Closed from a `finally` an exception is passing through: that exception is current.
        if sys.exc_info()[0] is not None:
            return False
        # A total of simulated seconds is reached by adding steps: allow for their rounding.
        return not self.total or self.n >= self.total * (1 - 1e-9)


class _Off:
    """No progress at all."""

    n = 0

    def update(self, n: float = 1) -> None:
        self.n += n

    def set_postfix(self, **kw: Any) -> None:
        pass

    def close(self) -> None:
        pass


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def interactive() -> bool:
    """A terminal, or a notebook (whose stderr is no terminal but shows a bar well)."""
    return sys.stderr.isatty() or _in_notebook()


def _in_notebook() -> bool:
    """Code running in a Jupyter kernel (not merely a process that imported ipykernel)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 (an IPython too old or too new to ask)
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def progress_bar(total: float | None, desc: str, unit: str, enabled: bool = True, initial: float = 0,
                 **tqdm_kw: Any) -> Any:  # fmt: skip
    """A bar on a terminal or in a notebook, log lines elsewhere, nothing when not `enabled`."""
    if not enabled:
        return _Off()
    if interactive():
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True, **tqdm_kw)
    return LogLines(total, desc, unit, initial)


def write(message: str) -> None:
    """A message that does not break a bar."""
    if interactive():
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)
    else:
        print(message, file=sys.stderr, flush=True)
