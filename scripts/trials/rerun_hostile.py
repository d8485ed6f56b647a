"""Re-run the cases of a hostile trial record (../shared/trials/hostile-*.md) and record what
each does now.

The record's "All cases" table gives, per case, an ID, the command (with ``<tmp>`` for the
trial's scratch folder and ``$REF``, ``$FAST``, ``$P`` for the option sets and interpreter its
setup paragraph names), the exit status, the first stderr line and a verdict. This harness
parses that table, substitutes those names, runs each case one after the other (never in
parallel: the machine is shared) under ``timeout -k 5 <limit> nice -n 10`` in its own scratch
folder ``<tmp>/adv/w/<ID>``, and writes one JSON line per case: exit status, first stderr line
(Lightning's INFO lines and progress bars skipped, as the trial did), whether a traceback was
printed, the files the case left, and the sha256 of every watched file (the case's folder and
the fixtures) before and after. The verdict is not computed: it is judged from these records,
as the trial judged it. A case whose set-up cannot be rebuilt here is recorded as
"not re-run: <why>" (``hostile_setups.SETUPS``), never guessed.

Usage (from a clone, so that the shared checkout stays quiet)::

    .venv/bin/python scripts/trials/rerun_hostile.py ../shared/trials/hostile-2026-11-28.md \
        --tmp /tmp/helper-F/t --non-clean --out /tmp/helper-F/rerun.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_setups import FIXTURES, SETUPS, Setup  # noqa: E402

#: the option sets the trial's setup paragraph names
REF = (
    "trainer.max_steps=30 trainer.val_check_interval=10 trainer.checkpoint_every_n_steps=5 "
    "data.batch_size=8 data.val_samples=16 eval.samples=16 eval.lengths=[8,16] "
    "optim.warmup_steps=5 trainer.enable_progress_bar=false model.dropout=0.1 "
    "trainer.log_every_n_steps=5 model.d_model=32 model.d_ff=64 eval.plot_formats=[png]"
)
FAST = "debug=fast eval.lengths=[8,16]"
#: the table's columns, in order
COLUMNS = (
    "id", "part", "case", "command", "exit", "seconds", "first_line", "traceback", "left",
    "prior_changed", "verdict", "note",
)  # fmt: skip
#: stderr lines the trial skipped when taking the first one: Lightning's INFO lines, its srun
#: hint, progress bars and the datasets library's split bars
SKIPPED = re.compile(
    r"^(INFO|\[rank|GPU available|TPU available|HPU available|IPU available|LOCAL_RANK|"
    r"You are using|The `srun` command|Generating \w+ split|Map|Filter|\s*$)|it/s\]|s/it\]|examples/s\]"
)
#: the interpreter a command's script is run with, by how the command starts
SCRIPTS = ("train.py", "eval.py", "scripts/")


@dataclass
class Case:
    """One row of the trial's "All cases" table (then: what the trial saw)."""

    id: str
    part: str
    case: str
    command: str
    exit: str
    first_line: str
    verdict: str
    note: str
    truncated: bool = field(default=False)


def split_row(line: str) -> list[str]:
    """A markdown table row -> its cells; a '|' inside backticks or escaped ('\\|') is part of
    its cell."""
    cells, cell, quoted = [], [], False
    text = line.strip().removeprefix("|").removesuffix("|").replace("\\|", "\0")
    for ch in text:
        if ch == "`":
            quoted = not quoted
        if ch == "\0":
            cell.append("|")
        elif ch == "|" and not quoted:
            cells.append("".join(cell).strip())
            cell = []
        else:
            cell.append(ch)
    cells.append("".join(cell).strip())
    return cells


def parse_cases(text: str) -> list[Case]:
    """The rows of the "## All cases" table of a trial record, in their order."""
    section = text.split("## All cases", 1)
    if len(section) < 2:
        raise ValueError("no '## All cases' section in the trial record")
    cases = []
    for line in section[1].splitlines():
        if not line.startswith("| ") or line.startswith("| ID ") or set(line) <= set("|- "):
            continue
        cells = split_row(line)
        if len(cells) != len(COLUMNS):
            raise ValueError(f"row {cells[0]!r}: {len(cells)} cells, expected {len(COLUMNS)}")
        row = dict(zip(COLUMNS, cells, strict=True))
        command = row["command"].strip("`")
        cases.append(
            Case(
                id=row["id"],
                part=row["part"],
                case=row["case"],
                command=command,
                exit=row["exit"],
                first_line=row["first_line"],
                verdict=row["verdict"].strip("*"),
                note=row["note"],
                truncated=command.endswith("…"),
            )
        )
    return cases


def expand(command: str, tmp: str, python: str = ".venv/bin/python") -> str:
    """The trial's placeholders replaced: ``<tmp>``, ``$REF``, ``$FAST``, ``$P``."""
    return (
        command.replace("<tmp>", tmp)
        .replace("$REF", REF)
        .replace("$FAST", FAST)
        .replace("$P ", f"{python} ")
    )


def argv_for(command: str, repo: str, python: str) -> list[str]:
    """A table command -> the argv to run; scripts are taken from ``repo``, so the case may run
    in its own scratch folder. The table writes commands as shell words, so they are split so."""
    words = shlex.split(command)
    if words and words[0].endswith("python"):
        words = words[1:]
    if words and words[0].startswith(SCRIPTS):
        words = [python, os.path.join(repo, words[0]), *words[1:]]
    return words


def exact_words(words: tuple[str, ...], tmp: str, repo: str, python: str) -> list[str]:
    """A set-up's exact argv with ``$P``, ``$REPO`` and the trial's placeholders filled in."""
    return [python if w == "$P" else expand(w, tmp, python).replace("$REPO", repo) for w in words]


def first_line(stderr: str) -> str:
    """The first stderr line the trial would have reported (``SKIPPED`` left out)."""
    for line in stderr.replace("\r", "\n").splitlines():
        if not SKIPPED.search(line):
            return line.strip()
    return ""


def tree_hashes(*roots: Path) -> dict[str, str]:
    """sha256 of every regular file under ``roots`` ('dir' for empty directories)."""
    out = {}
    for root in roots:
        if not root.exists():
            continue
        for dirpath, dirs, files in os.walk(root):
            if not dirs and not files and dirpath != str(root):  # the case's own folder aside
                out[dirpath] = "dir"
            for name in files:
                path = os.path.join(dirpath, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    out[path] = "special"
                    continue
                digest = hashlib.sha256()
                with open(path, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        digest.update(block)
                out[path] = digest.hexdigest()
    return out


def shell(script: str, cwd: Path, env: dict[str, str], limit: int = 900) -> int:
    """A set-up script (bash), its output appended to ``cwd/setup.log``."""
    with open(cwd / "setup.log", "a") as log:
        return subprocess.call(
            ["timeout", "-k", "5", str(limit), "nice", "-n", "10", "bash", "-ec", script],
            cwd=cwd, env=env, stdout=log, stderr=log,
        )  # fmt: skip


def build_fixture(name: str, tmp: str, env: dict[str, str]) -> None:
    """A fixture under ``<tmp>/adv/fx``, built once (a ``.built-<name>`` marker says so)."""
    fx = Path(tmp, "adv", "fx")
    fx.mkdir(parents=True, exist_ok=True)
    marker = fx / f".built-{name}"
    if marker.exists():
        return
    if shell(expand(FIXTURES[name], tmp, env["P"]), fx, env) != 0:
        raise RuntimeError(f"fixture {name} could not be built (see {fx}/setup.log)")
    marker.touch()


def changes(before: dict[str, str], after: dict[str, str], tmp: str) -> dict[str, list[str]]:
    """Files added, changed and removed, relative to ``tmp``."""

    def rel(paths):
        return sorted(os.path.relpath(p, tmp) for p in paths)

    return {
        "added": rel(after.keys() - before.keys()),
        "changed": rel(p for p in before.keys() & after.keys() if before[p] != after[p]),
        "removed": rel(before.keys() - after.keys()),
    }


def run_case(case: Case, tmp: str, repo: str, python: str, limit: int) -> dict:
    """Run one case as its set-up says; -> its record."""
    setup = SETUPS.get(case.id, Setup())
    record = {"id": case.id, "then": case.verdict, "then_exit": case.exit}
    if setup.skip:
        return {**record, "status": f"not re-run: {setup.skip}"}
    command = setup.command or case.command
    if case.truncated and not (setup.command or setup.argv):
        return {**record, "status": "not re-run: the command is cut short ('…') in the record"}
    work = Path(tmp, "adv", "w", case.id)
    if work.exists():  # a case starts from an empty folder, also when it is run again
        shutil.rmtree(work)
    work.mkdir(parents=True)
    env = {
        **os.environ, "HOME": str(Path(tmp, "adv", "home")), "OMP_NUM_THREADS": "1",
        "P": python, "REPO": repo, "T": tmp, "FX": str(Path(tmp, "adv", "fx")), "W": str(work),
        # the clone's own sources: its .venv may be a link to an editable install of another
        # checkout, whose lengen would be imported instead
        "PYTHONPATH": os.path.join(repo, "src"),
    }  # fmt: skip
    env.update({k: expand(v, tmp, python) for k, v in setup.env.items()})
    for name in setup.fixtures:
        build_fixture(
            name,
            tmp,
            {**os.environ, **{k: env[k] for k in ("HOME", "P", "REPO", "T", "FX", "PYTHONPATH")}},
        )
    if setup.prep and shell(expand(setup.prep, tmp, python), work, env) != 0:
        return {**record, "status": f"not re-run: its set-up failed (see {work}/setup.log)"}
    watched = (work, Path(tmp, "adv", "fx"))
    before = tree_hashes(*watched)
    command = expand(command, tmp, python)
    limit = setup.limit or limit
    wrap = ["timeout", "-k", "5", str(limit), "nice", "-n", "10"]
    if setup.limit_as_gb:
        wrap += ["prlimit", f"--as={int(setup.limit_as_gb * 2**30)}"]
    if setup.shell:  # redirections or an environment prefix: the command is a shell line
        script = (
            f"{python} {command[len('.venv/bin/python ') :]}"
            if command.startswith(".venv/bin/python ")
            else command
        )
        for script_name in ("train.py", "eval.py"):
            script = script.replace(f" {script_name} ", f" {repo}/{script_name} ", 1)
        argv = [*wrap, "bash", "-c", script]
    else:
        argv = [
            *wrap,
            *(exact_words(setup.argv, tmp, repo, python) or argv_for(command, repo, python)),
        ]
    out_path, err_path = work / "case.out", work / "case.err"
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            argv, cwd=work, env=env, stdout=out, stderr=err, start_new_session=True
        )
        if setup.signal:
            _signal_when(proc, setup, tmp)
        rc = proc.wait()
    seconds = round(time.monotonic() - start, 2)
    stderr = err_path.read_text(errors="replace")
    stdout = out_path.read_text(errors="replace")
    after = tree_hashes(*watched)
    if setup.after:  # after the hashing: it may unmount what the case wrote on
        shell(expand(setup.after, tmp, python), work, env)
    diff = changes(before, after, tmp)
    own = {"case.out", "case.err", "setup.log"}
    diff["added"] = [p for p in diff["added"] if os.path.basename(p) not in own]
    diff["changed"] = [p for p in diff["changed"] if os.path.basename(p) not in own]
    return {
        **record, "status": "re-run", "command": command, "exit": rc, "seconds": seconds,
        "first_line": first_line(stderr), "traceback": "Traceback (most recent call last)" in stderr,
        "stderr_lines": len(stderr.splitlines()), "stderr_bytes": len(stderr.encode()),
        "stdout_tail": stdout.strip().splitlines()[-3:],
        "estimate": next((x for x in (stdout + stderr).splitlines() if "estimate" in x), ""),
        **diff,
    }  # fmt: skip


def _signal_when(proc: subprocess.Popen, setup: Setup, tmp: str) -> None:
    """Send the set-up's signal to the case's process when its condition holds: ``after``
    seconds, or once a file matching ``file`` (a glob under ``<tmp>``) exists."""
    name, when = setup.signal
    start = time.monotonic()
    while proc.poll() is None and time.monotonic() - start < (setup.limit or 600):
        if "after" in when and time.monotonic() - start >= when["after"]:
            break
        if "file" in when and list(
            Path(tmp).glob(expand(when["file"], tmp).removeprefix(tmp + "/"))
        ):
            time.sleep(when.get("delay", 0))
            break
        time.sleep(0.05)
    if proc.poll() is None:
        # the command's own process (timeout's child: nice and prlimit exec it), as a user's
        # kill -TERM of the command would reach it; the timeout wrapper itself is left alone
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
        for pid in children.stdout.split()[:1]:
            os.kill(int(pid), getattr(signal, name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("record", help="the trial record (markdown)")
    parser.add_argument("--tmp", required=True, help="scratch folder standing for <tmp>")
    parser.add_argument("--out", required=True, help="JSON-lines file the records are appended to")
    parser.add_argument("--ids", default="", help="comma-separated IDs (default: all selected)")
    parser.add_argument("--non-clean", action="store_true", help="only cases not clean then")
    parser.add_argument("--clean", action="store_true", help="only cases clean then")
    parser.add_argument("--every", type=int, default=1, help="every n-th selected case (a sample)")
    parser.add_argument("--limit", type=int, default=120, help="seconds per case (timeout)")
    parser.add_argument("--repo", default=os.getcwd(), help="the checkout whose scripts run")
    args = parser.parse_args(argv)
    cases = parse_cases(Path(args.record).read_text())
    if args.ids:
        wanted = args.ids.split(",")
        cases = [c for c in cases if c.id in wanted]
    if args.non_clean:
        cases = [c for c in cases if c.verdict != "clean"]
    if args.clean:
        cases = [c for c in cases if c.verdict == "clean"]
    cases = cases[:: args.every]
    python = os.path.join(args.repo, ".venv", "bin", "python")
    for case in cases:
        try:
            record = run_case(case, os.path.abspath(args.tmp), args.repo, python, args.limit)
        except RuntimeError as e:  # a fixture that could not be built: say so, go on
            record = {"id": case.id, "then": case.verdict, "status": f"not re-run: {e}"}
        with open(args.out, "a") as f:
            f.write(json.dumps(record) + "\n")
        print(f"{case.id}: {record.get('status')} exit={record.get('exit')} "
              f"{record.get('first_line', '')[:120]}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
