"""A line now and then while one long item of a loop runs: an evaluation length of hours
(``pe=stick_breaking`` at 30,000 tokens: O15) printed nothing between its start and its end,
so a run working and a run hung looked the same. ``lengen.progress.each`` holds one around
each item in ``lines`` mode (a line on stdout) and in ``bar`` mode (the bar's postfix: a line
of its own would tear a terminal's bar); the first word comes after ``FIRST_SECONDS``, each
next one after twice the wait before (at most ``LONGEST_SECONDS``), so a ten-hour length says
it about a dozen times, not hundreds. No torch; a daemon thread that only prints."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

#: the first line after this long (a length that takes less prints none)
FIRST_SECONDS = 60.0
#: the wait between lines doubles up to this
LONGEST_SECONDS = 1800.0


@contextlib.contextmanager
def heartbeat(
    prefix: str, first: float | None = None, say: Callable[[str], None] | None = None
) -> Iterator[None]:
    """While the block runs: ``<prefix> still running after <time>``, first after ``first``
    seconds (default ``FIRST_SECONDS``), then at doubling waits; ``say`` shows it (default: a
    line on stdout; a bar's ``set_postfix_str`` in ``bar`` mode)."""
    from lengen.estimate import duration

    if say is None:

        def say(line: str) -> None:
            print(line, flush=True)

    done = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        wait = FIRST_SECONDS if first is None else first
        while not done.wait(wait):
            say(f"{prefix} still running after {duration(time.monotonic() - start)}")
            wait = min(2 * wait, LONGEST_SECONDS)

    thread = threading.Thread(target=beat, name="lengen-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
