"""A script's command line called in the test's own process: for tests of what the command
writes and says, not of the process (a subprocess costs an interpreter and lengen's imports,
~2 s a call on a loaded 2-core machine). Exit statuses, signals, closed streams, environments
and read-only mount namespaces still need a real process: those tests start one."""

from __future__ import annotations

import subprocess


def call_main(main, arguments, capsys) -> subprocess.CompletedProcess:
    """``main(arguments)`` (the function a script ends in, ``sys.exit(main())``) -> its exit
    status and what it printed, as a subprocess's would be: an argparse refusal's SystemExit
    is its status too."""
    arguments = [str(argument) for argument in arguments]
    capsys.readouterr()  # what the test printed before: not the command's
    try:
        status = main(arguments)
    except SystemExit as stop:
        status = stop.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(arguments, status, out, err)
