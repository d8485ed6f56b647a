"""Re-run the hostile trial's cases that ``rerun_hostile.py`` cannot: signals sent at a moment of
a run, a signal then resume compared with the undisturbed run, two commands at once on one
folder, a pipe whose reader goes away, a folder made read-only or a disk filled mid-run.

A case is a ``Scenario``: ``Step``s run one after the other in ``<tmp>/w/<scenario>``, each a
command of the trial's (``$REF``, ``$FAST``, ``<tmp>`` as in ``rerun_hostile``). A step's
moment comes from the run's own output, never from a fixed sleep, so the machine's load does not
change what is tested: ``on=(regex, action)`` does ``action`` once a line of the step's stdout
or stderr matches (a signal to the command's process, ``g``-prefixed to its process group, or a
bash line such as a remount), and a ``background`` step lets the next steps start once a line
matching its ``until`` appears (two commands at once), its end waited for after the last step.
Each step gets one JSON record (exit status, first stderr line as the trial took it, traceback
or not, seconds, which of the run's files exist after it), and each ``compare`` pair of run
directories one record saying, per part (results rows without their timings, validation,
attention diagnostics, accuracy by answer position, the other results keys, logs/metrics.csv),
whether the two runs agree exactly. Verdicts are judged from these records, as the trial judged.

Usage (from the checkout, one scenario at a time; the machine is shared)::

    OMP_NUM_THREADS=1 .venv/bin/python scripts/trials/rerun_hostile_extra.py --tmp /tmp/x/t \
        --out /tmp/x/extra.jsonl SR1 SR7
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import extra_scenarios_files  # noqa: E402
from extra_scenarios import SCENARIOS as BASE  # noqa: E402
from extra_scenarios import Scenario, Step  # noqa: E402
from rerun_hostile import FAST, REF, first_line  # noqa: E402

#: every scenario, in the order they are run by default
SCENARIOS = {**BASE, **extra_scenarios_files.SCENARIOS}
#: keys of a results row that measure the machine, not the model
TIMINGS = ("seconds", "peak_mem_mb", "batch_size")
#: results keys that differ between an undisturbed and a resumed run by design (timing: the
#: machine's, and a resumed run's covers only its own process)
BY_DESIGN = ("provenance", "resumed", "timing")
#: data.cache's keys that say whether the cache was hit
CACHE_HITS = ("hit", "tokenizer_hit")
#: the prefixes of a step's moment that is no output line (``watch_moment``)
MOMENTS = ("file:", "after:")
#: the parts compared, each a results key (``eval`` and ``logs/metrics.csv`` apart)
PARTS = ("validation", "attention_diagnostics", "accuracy_by_answer_position")


@dataclass
class Running:
    """A started step: its process, where its output goes, what its watchers saw."""

    step: Step
    proc: subprocess.Popen
    start: float
    lines: list[str] = field(default_factory=list)  # stderr, in order
    fired: threading.Event = field(default_factory=threading.Event)
    ready: threading.Event = field(default_factory=threading.Event)
    fired_at: str = ""  # the line that fired the action
    threads: list[threading.Thread] = field(default_factory=list)
    sinks: tuple = ()  # the files its stdout and stderr are copied to


def expand(text: str, tmp: str, work: str, repo: str, python: str) -> str:
    """The trial's placeholders, and ``$W`` (the scenario's folder), ``$REPO``, ``$P``."""
    for name, value in (
        ("$REF_LINES", REF.replace("enable_progress_bar=false", "enable_progress_bar=lines")),
        ("$REF", REF),
        ("$FAST", FAST),
        ("$W", work),
        ("$REPO", repo),
        ("$P", python),
        ("<tmp>", tmp),
    ):
        text = text.replace(name, value)
    return text


def argv_for(command: str, repo: str, python: str) -> list[str]:
    """Shell words -> argv; the repository's scripts run with its interpreter."""
    words = shlex.split(command)
    if words and words[0].startswith(("train.py", "eval.py", "scripts/")):
        words = [python, os.path.join(repo, words[0]), *words[1:]]
    return words


def act(run: Running, action: str, work: Path, env: dict[str, str]) -> None:
    """Do a step's action: ``TERM``, ``INT``, ``KILL``, ``USR1`` (``g``: to its process group)
    or ``sh:<bash>`` (run in the scenario's folder, waited for)."""
    if action.startswith("sh:"):
        subprocess.run(["bash", "-c", action[3:]], cwd=work, env=env, check=False)
        return
    if run.proc.poll() is not None:
        return
    group, name = action.startswith("g"), action.removeprefix("g")
    sig = getattr(signal, f"SIG{name}")
    if group:
        os.killpg(run.proc.pid, sig)
    else:
        os.kill(run.proc.pid, sig)


def watch(run: Running, stream, sink, is_err: bool, work: Path, env: dict[str, str]) -> None:
    """Copy one of the step's streams to ``sink``, line by line, firing its action and its
    readiness on the lines that match."""
    step = run.step
    for raw in iter(stream.readline, b""):
        sink.write(raw)
        sink.flush()
        line = raw.decode(errors="replace").rstrip("\n")
        if is_err:
            run.lines.append(line)
        by_line = step.on and not step.on[0].startswith(MOMENTS)
        if by_line and not run.fired.is_set() and re.search(step.on[0], line):
            run.fired_at = line[:200]
            act(run, step.on[1], work, env)
            run.fired.set()
        if step.until and re.search(step.until, line):
            run.ready.set()
    stream.close()


def watch_moment(run: Running, work: Path, env: dict[str, str]) -> None:
    """A moment that no line marks: ``file:<path>[&<path>…]`` (relative to the scenario's
    folder, all of them there; polled every 5 ms: a checkpoint's temporary file lives for
    milliseconds) or ``after:<seconds>`` (only where the case's moment is a time, as S07's
    'before training')."""
    kind, _, arg = run.step.on[0].partition(":")
    while run.proc.poll() is None:
        elapsed = time.monotonic() - run.start
        there = kind == "file" and all((work / p).exists() for p in arg.split("&"))
        if there or (kind == "after" and elapsed >= float(arg)):
            run.fired_at = f"{kind}:{arg} at {elapsed:.2f} s"
            act(run, run.step.on[1], work, env)
            run.fired.set()
            return
        time.sleep(0.005)


def start(step: Step, work: Path, env: dict[str, str], repo: str, python: str) -> Running:
    tmp = env["T"]
    command = expand(step.command, tmp, str(work), repo, python)
    # nice execs the command, so the pid signalled is the command's own
    argv = [
        "nice",
        "-n",
        "10",
        *(["bash", "-c", command] if step.shell else argv_for(command, repo, python)),
    ]
    step_env = {**env, **{k: expand(v, tmp, str(work), repo, python) for k, v in step.env.items()}}
    proc = subprocess.Popen(
        argv, cwd=work, env=step_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    run = Running(step=step, proc=proc, start=time.monotonic())
    out = open(work / f"{step.id}.out", "wb")  # noqa: SIM115 (closed by finish)
    err = open(work / f"{step.id}.err", "wb")  # noqa: SIM115
    for stream, sink, is_err in ((proc.stdout, out, False), (proc.stderr, err, True)):
        thread = threading.Thread(target=watch, args=(run, stream, sink, is_err, work, step_env))
        thread.daemon = True
        thread.start()
        run.threads.append(thread)
    if step.on and step.on[0].startswith(MOMENTS):
        thread = threading.Thread(target=watch_moment, args=(run, work, step_env), daemon=True)
        thread.start()
        run.threads.append(thread)
    run.sinks = (out, err)
    return run


def finish(run: Running, limit: int, work: Path) -> dict:
    """Wait for the step (its process group killed past ``limit`` s); -> its record."""
    try:
        rc = run.proc.wait(timeout=max(1, limit - (time.monotonic() - run.start)))
    except subprocess.TimeoutExpired:
        os.killpg(run.proc.pid, signal.SIGKILL)
        rc = f"{run.proc.wait()} (killed at the {limit}-s limit)"
    for thread in run.threads:
        thread.join(timeout=10)
    for sink in run.sinks:
        sink.close()
    stderr = "\n".join(run.lines)
    record = {
        "id": run.step.id, "command": run.step.command, "exit": rc,
        "seconds": round(time.monotonic() - run.start, 1),
        "first_line": first_line(stderr), "traceback": "Traceback (most recent" in stderr,
        "stderr_lines": len(run.lines),
        "action": run.step.on[1] if run.step.on else "",
        "fired_at": run.fired_at if run.step.on else "",
    }  # fmt: skip
    if run.step.on and not run.fired.is_set():
        record["fired_at"] = "never: no line matched (the action was not done)"
    for rel in run.step.files:
        path = work / rel
        record.setdefault("files", {})[rel] = path.exists()
    return record


def rows_without_timings(results: dict) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMINGS} for row in results.get("eval", [])]


def metrics_rows(run_dir: Path) -> list[dict] | None:
    path = run_dir / "logs" / "metrics.csv"
    if not path.is_file():
        return None
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def without_by_design(results: dict) -> dict:
    """``results`` less what differs between two runs of one config by design: whether the
    data cache was hit (the first of them builds it)."""
    cache = results.get("data", {}).get("cache")
    if isinstance(cache, dict):
        kept = {k: v for k, v in cache.items() if k not in CACHE_HITS}
        results = {**results, "data": {**results["data"], "cache": kept}}
    return results


def compare(ref: Path, other: Path) -> dict:
    """Per part: 'identical', or what differs (module docstring)."""
    try:
        a = json.loads((ref / "results.json").read_text())
        b = json.loads((other / "results.json").read_text())
    except (OSError, ValueError) as e:
        return {"results": f"cannot compare: {type(e).__name__}: {e}"}
    a, b, out = without_by_design(a), without_by_design(b), {}

    def verdict(x, y) -> str:
        return "identical" if x == y else "differs"

    out["rows"] = verdict(rows_without_timings(a), rows_without_timings(b))
    for part in PARTS:
        out[part.split("_")[0] if part != "validation" else part] = verdict(
            a.get(part), b.get(part)
        )
    rest = set(a) | set(b)
    rest -= {"eval", *PARTS, *BY_DESIGN}
    differing = sorted(k for k in rest if a.get(k) != b.get(k))
    out["other keys"] = "identical" if not differing else f"differ: {', '.join(differing)}"
    ma, mb = metrics_rows(ref), metrics_rows(other)
    if ma is None or mb is None:
        out["metrics.csv"] = "missing"
    elif ma == mb:
        out["metrics.csv"] = f"identical ({len(ma)} rows)"
    else:
        only_a = [r for r in ma if r not in mb]
        only_b = [r for r in mb if r not in ma]
        out["metrics.csv"] = (
            f"differs ({len(ma)} vs {len(mb)} rows; first only in the undisturbed run: "
            f"{only_a[:1]}, first only in the other: {only_b[:1]})"
        )
    return out


def run_scenario(scenario: Scenario, tmp: str, repo: str, python: str, limit: int) -> list[dict]:
    work = Path(tmp, "w", scenario.id)
    for cmd in scenario.cleanup:  # what a previous attempt may have left mounted
        subprocess.run(["bash", "-c", cmd], cwd=work if work.exists() else tmp, check=False)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    env = {
        **os.environ, "HOME": str(Path(tmp, "home")), "OMP_NUM_THREADS": "1", "T": tmp,
        "W": str(work), "P": python, "REPO": repo, "PYTHONPATH": os.path.join(repo, "src"),
    }  # fmt: skip
    records, background = [], []
    for step in scenario.steps:
        run = start(step, work, env, repo, python)
        if step.background:
            background.append(run)
            # the next step starts once this one is where the case needs it (at once when
            # no line is named), or has ended
            while step.until and not run.ready.is_set() and run.proc.poll() is None:
                run.ready.wait(0.1)
            continue
        records.append({"scenario": scenario.id, **finish(run, step.limit or limit, work)})
    for run in background:
        records.append({"scenario": scenario.id, **finish(run, run.step.limit or limit, work)})
    for ref, other in scenario.compare:  # before the clean-up, which may unmount one
        records.append(
            {"scenario": scenario.id, "compare": [ref, other], **compare(work / ref, work / other)}
        )
    for cmd in scenario.cleanup:
        subprocess.run(["bash", "-c", cmd], cwd=work, env=env, check=False)
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="scenarios to run (default: all, in order)")
    parser.add_argument("--tmp", required=True, help="scratch folder (<tmp>)")
    parser.add_argument("--out", required=True, help="JSON-lines file the records are appended to")
    parser.add_argument("--limit", type=int, default=300, help="seconds per step (default 300)")
    parser.add_argument("--repo", default=os.getcwd(), help="the checkout whose scripts run")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    if args.list:
        for s in SCENARIOS.values():
            print(f"{s.id}: {s.cases} — {s.what}")
        return 0
    unknown = [i for i in args.ids if i not in SCENARIOS]
    if unknown:
        print(f"error: unknown scenario(s) {', '.join(unknown)}; allowed: {', '.join(SCENARIOS)}")
        return 2
    tmp = os.path.abspath(args.tmp)
    Path(tmp, "home").mkdir(parents=True, exist_ok=True)
    python = os.path.join(args.repo, ".venv", "bin", "python")
    for sid in args.ids or list(SCENARIOS):
        for record in run_scenario(SCENARIOS[sid], tmp, args.repo, python, args.limit):
            with open(args.out, "a") as f:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
            print(json.dumps(record, ensure_ascii=False)[:400], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
