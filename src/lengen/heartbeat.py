"""A line now and then while one long item of a loop runs: an evaluation length of hours
(``pe=stick_breaking`` at 30,000 tokens: O15) printed nothing between its start and its end,
so a run working and a run hung looked the same. ``lengen.progress.each`` holds one around
each item in ``lines`` mode; the first line comes after ``FIRST_SECONDS``, each next one after
twice the wait before (at most ``LONGEST_SECONDS``), so a ten-hour length prints about a
dozen lines, not hundreds. No torch; a daemon thread that only prints."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

#: the first line after this long (a length that takes less prints none)
FIRST_SECONDS = 60.0
#: the wait between lines doubles up to this
LONGEST_SECONDS = 1800.0


@contextlib.contextmanager
def heartbeat(prefix: str, first: float | None = None) -> Iterator[None]:
    """While the block runs: ``<prefix> still running after <time>`` on stdout, first after
    ``first`` seconds (default ``FIRST_SECONDS``), then at doubling waits."""
    from lengen.estimate import duration

    done = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        wait = FIRST_SECONDS if first is None else first
        while not done.wait(wait):
            print(f"{prefix} still running after {duration(time.monotonic() - start)}", flush=True)
            wait = min(2 * wait, LONGEST_SECONDS)

    thread = threading.Thread(target=beat, name="lengen-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
