"""A leg of training on a lent accelerator, through the device tool's narrow pipe.

The device tool (this workplace's, ``/work/.library/device``) sends the repository's working tree
(tracked files, and untracked files git does not ignore) plus named ``carry`` paths, at most 64 MiB
a call, and brings back at most 8 files of 16 MiB, 64 MiB in all, from ``$OUT``. The repository
alone is over that (the packaged models and the results' log-probabilities, about 100 MB), and a
medium run directory is 230-250 MB. So a leg goes in steps, each a command of this script:

1. ``send RUN_DIR...`` (here): packs each run as float16 pieces without ``best.pt`` (about 50 MB:
   ``baselines pack-run --without-best``) into ``.device-leg/NAME/``, and takes the large files
   out of git's index (``git rm --cached``; the files stay on disk) and into
   ``.git/info/exclude``, so that neither travels; a pre-commit hook refuses commits until the
   index is put back. Prints what each call will send, and the calls.
2. ``train NAME --minutes M [--background]`` (there, in a call that carries ``.device-leg/NAME``):
   unpacks the run into ``/tmp/device-leg/runs/NAME`` and resumes it with the command its
   ``config.json`` records, on ``--device cuda`` for ``M`` minutes (the trainer stops at a step
   and validates). ``--background`` starts it in its own session and returns, so the next call
   can bring the next run while this one trains.
3. ``pack NAME... --out $OUT`` (there): waits for the runs, packs each (float16; ``best.pt`` only
   when the leg wrote one, that is beat the run's best) and moves into ``$OUT`` what the limits
   let through; ``fetch --out $OUT`` in the next call brings the rest.
4. ``land --from FOLDER... RUN_DIR...`` (here): rebuilds each run from its pieces, with the
   ``best.pt`` left behind where the leg wrote none, puts it in place of ``RUN_DIR`` (kept as
   ``RUN_DIR.before-leg``), and puts git's index back as it was; ``restore`` does only that.

Run from the repository root: ``python tools/device_leg.py COMMAND ...``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

#: The device tool's limits: what travels to the machine, and what comes back from ``$OUT``.
SEND_LIMIT = 64 * 2**20
BACK_FILES, BACK_FILE_LIMIT, BACK_LIMIT = 8, 16 * 2**20, 64 * 2**20
#: Where ``send`` stages the runs (ignored by git, named in ``carry``).
STAGE = Path(".device-leg")
#: Where the runs train and wait on the device machine.
THERE = Path("/tmp/device-leg")
#: The tracked files that stay behind: the packaged models, the results' log-probabilities and
#: the runs' snapshots (none of which training reads).
LEFT_BEHIND = ("*.pt", "*.npy", "results/wikitext-2/training/snapshots")
EXCLUDE_BEGIN, EXCLUDE_END = "# device_leg.py: begin", "# device_leg.py: end"
#: While the index is slimmed, a commit would delete the files left behind: a pre-commit hook
#: of this text refuses it.
HOOK_TEXT = """#!/bin/sh
# device_leg.py: git's index is slimmed for a leg on a lent accelerator
echo "error: git's index is slimmed for a device leg: run python tools/device_leg.py restore first" >&2
exit 1
"""
#: How long ``train --background`` watches the run start before it returns.
STARTUP_SECONDS = 20
#: ``baselines train`` options that the leg sets itself (each takes a value).
LEG_OPTIONS = ("--device", "--threads", "--max-minutes", "--max-steps", "--output-dir")


class LegError(Exception):
    """A step that cannot go on; the message is one line."""


class Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are a :class:`LegError`: one line, like every other."""

    def error(self, message: str) -> NoReturn:
        raise LegError(message)


def positive_minutes(text: str) -> float:
    """A finite number of minutes greater than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number of minutes greater than 0, got {text}")
    return value


def existing_folder(text: str) -> Path:
    """A folder that exists (the device tool's ``$OUT``)."""
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such folder")
    return Path(text)


def run(*command: str, capture: bool = False) -> str:
    """Run ``command``; its stdout when ``capture``. Raises LegError when it fails."""
    done = subprocess.run(command, text=True, capture_output=capture)
    if done.returncode != 0:
        detail = f": {done.stderr.strip().splitlines()[-1]}" if capture and done.stderr.strip() else ""
        raise LegError(f"`{shlex.join(command)}` failed (exit status {done.returncode}){detail}")
    return done.stdout if capture else ""


def baselines(*arguments: str) -> None:
    run(sys.executable, "-m", "baselines", *arguments)


# ------------------------------------------------------------------------------------- here
def travelling_bytes() -> int:
    """The bytes of the working tree the device tool sends: tracked files and untracked files git
    does not ignore."""
    listed = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", capture=True)
    return sum(path.stat().st_size for path in map(Path, listed.split("\0")) if path.is_file())


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def git_path(name: str) -> Path:
    """A file of the repository's git directory (``info/exclude``, ``hooks/pre-commit``), where
    git looks for it."""
    return Path(run("git", "rev-parse", "--git-path", name, capture=True).strip())


def slim_index() -> None:
    """Take :data:`LEFT_BEHIND` out of git's index and into ``.git/info/exclude``, and refuse
    commits meanwhile (a pre-commit hook of :data:`HOOK_TEXT`)."""
    hook = git_path("hooks/pre-commit")
    if hook.exists() and hook.read_text(encoding="utf-8") != HOOK_TEXT:
        raise LegError(f"{hook} exists: the leg needs that hook to refuse commits while the index is slimmed")
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(HOOK_TEXT, encoding="utf-8")
    hook.chmod(0o755)
    run("git", "rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *LEFT_BEHIND)
    kept = _exclude_lines_without_block()
    block = [EXCLUDE_BEGIN, f"/{STAGE}/", *LEFT_BEHIND, EXCLUDE_END]
    git_path("info/exclude").write_text("\n".join([*kept, *block]) + "\n", encoding="utf-8")


def restore_index() -> bool:
    """Put the index and ``.git/info/exclude`` back; whether there was anything to put back."""
    exclude, hook = git_path("info/exclude"), git_path("hooks/pre-commit")
    kept = _exclude_lines_without_block()
    slimmed = exclude.is_file() and EXCLUDE_BEGIN in exclude.read_text(encoding="utf-8")
    run("git", "reset", "-q", "HEAD", "--", *LEFT_BEHIND)
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text("".join(line + "\n" for line in [*kept, f"/{STAGE}/"]), encoding="utf-8")
    if hook.is_file() and hook.read_text(encoding="utf-8") == HOOK_TEXT:
        hook.unlink()
    return slimmed


def _exclude_lines_without_block() -> list[str]:
    exclude = git_path("info/exclude")
    lines = exclude.read_text(encoding="utf-8").splitlines() if exclude.is_file() else []
    if EXCLUDE_BEGIN in lines:
        lines = lines[: lines.index(EXCLUDE_BEGIN)] + lines[lines.index(EXCLUDE_END) + 1 :]
    return [line for line in lines if line != f"/{STAGE}/"]


def command_send(args: argparse.Namespace) -> None:
    calls = device_calls([run_dir.name for run_dir in args.run_dirs], args.device_minutes)
    restore_index()  # undo an earlier send; exclude /.device-leg/, which travels only when carried
    if run("git", "diff", "--cached", "--name-only", capture=True).strip():
        raise LegError("git's index holds staged changes: commit or unstage them first")
    if STAGE.exists():
        shutil.rmtree(STAGE)
    for run_dir in args.run_dirs:
        baselines(
            "pack-run", str(run_dir), str(STAGE / run_dir.name), "--precision", "float16", "--without-best"
        )
    slim_index()
    tree = travelling_bytes()
    print(f"the working tree now sends {tree / 2**20:.1f} MiB a call (limit {SEND_LIMIT / 2**20:.0f})")
    for run_dir in args.run_dirs:
        carried = folder_bytes(STAGE / run_dir.name)
        total = tree + carried
        print(f"  carry {STAGE / run_dir.name}: {carried / 2**20:.1f} MiB, {total / 2**20:.1f} MiB in all")
        if total > SEND_LIMIT:
            restore_index()
            raise LegError(
                f"a call carrying {run_dir.name} would send {total / 2**20:.1f} MiB: over the limit"
            )
    print("git's index is slimmed: `python tools/device_leg.py restore` (or `land`) before any commit")
    print(f"then, one call after the other at once ({args.device_minutes:g} minutes of device time left):")
    for call in calls:
        print(f"  {call}")


#: Device minutes a leg keeps for starting the machine, packing, fetching and a margin.
OVERHEAD_MINUTES = 6
#: The longest a run trains in one leg: the call that trains last also waits for the others and
#: packs them all (about 2.5 minutes), within the tool's 10 minutes a command.
LEG_MINUTES = 7.5
#: How the device tool's calls run this script there.
SCRIPT = ("python3", "tools/device_leg.py")


def device_calls(names: list[str], device_minutes: float) -> list[str]:
    """The device tool's calls of a leg that trains the runs ``names`` side by side on one
    machine: each but the last starts in the background, the last trains in the foreground
    and then packs them all; ``fetch`` brings back what the limits held back. The names are
    quoted for the shell, and the calls' strings as JSON."""
    minutes = min(device_minutes - OVERHEAD_MINUTES, LEG_MINUTES)
    if minutes < 2:
        raise LegError(f"{device_minutes:g} minutes of device time leave too little for a leg")
    calls = [
        _call(shlex.join([*SCRIPT, "train", name, "--minutes", f"{minutes:g}", "--background"]), name, 300)
        for name in names[:-1]
    ]
    last = shlex.join([*SCRIPT, "train", names[-1], "--minutes", f"{minutes - 1:g}"])
    pack = shlex.join([*SCRIPT, "pack", *names])
    calls.append(_call(f"{last} && {pack} --out $OUT", names[-1], 600))
    fetch = json.dumps(f"{shlex.join(SCRIPT)} fetch --out $OUT")
    calls.append(f"run(command={fetch}), again while files are left; then give_back")
    return calls


def _call(line: str, carried: str, timeout_s: int) -> str:
    """A call of the device tool that runs the shell ``line`` carrying ``.device-leg/CARRIED``."""
    carry = json.dumps([str(STAGE / carried)])
    return f"run(command={json.dumps(line)}, carry={carry}, timeout_s={timeout_s})"


def gather(name: str, folders: Iterable[Path], into: Path) -> Path:
    """Copy ``NAME.manifest.json`` and its pieces from ``folders``, which it only reads, into the
    folder ``into``; its manifest."""
    for folder in folders:
        for path in folder.glob(f"{name}.*"):
            if path.is_file():
                shutil.copyfile(path, into / path.name)
    manifest = into / f"{name}.manifest.json"
    if not manifest.is_file():
        raise LegError(f"no {manifest.name} in {', '.join(map(str, folders))}")
    return manifest


def command_land(args: argparse.Namespace) -> None:
    try:
        for run_dir in args.run_dirs:
            land(run_dir, args.folders)
    finally:  # the device calls are over, whatever came back
        if restore_index():
            print("git's index is back as it was")


def land(run_dir: Path, folders: list[Path]) -> None:
    """Rebuild ``run_dir``'s leg from its pieces in ``folders`` and put it in ``run_dir``'s place.
    The pieces are gathered in a scratch folder beside it, removed at the end: ``folders`` are
    only read, so that what came back is still there to land again whatever happens."""
    name = run_dir.name
    landed, before = run_dir.parent / f"{name}.landed", run_dir.parent / f"{name}.before-leg"
    if not run_dir.is_dir():
        raise LegError(f"{run_dir}: no such run directory")
    if before.exists():
        raise LegError(f"{before} exists from an earlier leg: move it away first")
    with tempfile.TemporaryDirectory(prefix=f".{name}.leg-pieces.", dir=run_dir.parent) as scratch:
        manifest = gather(name, folders, Path(scratch))
        baselines("unpack-run", str(manifest), str(landed), "--best-from", str(run_dir))
    run_dir.rename(before)
    landed.rename(run_dir)
    print(f"{run_dir}: the leg's run (the run before it: {before})")


def command_restore(args: argparse.Namespace) -> None:
    print("git's index is back as it was" if restore_index() else "git's index was not slimmed")


# ------------------------------------------------------------------------------------ there
def train_command(run_dir: Path, device: str, minutes: float) -> list[str]:
    """The ``baselines train`` command that resumes ``run_dir``: the one its ``config.json``
    records, with the leg's device, time and directory (:data:`LEG_OPTIONS`) instead."""
    recorded = shlex.split(json.loads((run_dir / "config.json").read_text(encoding="utf-8"))["command"])
    options, kept = iter(recorded[recorded.index("train") + 1 :]), []
    for option in options:
        if option in LEG_OPTIONS:
            next(options, None)  # and its value
        elif option.split("=")[0] not in LEG_OPTIONS:
            kept.append(option)
    leg = ["--device", device, "--max-minutes", str(minutes), "--output-dir", str(run_dir)]
    return [sys.executable, "-m", "baselines", "train", *kept, *leg]


def command_train(args: argparse.Namespace) -> None:
    run_dir = THERE / "runs" / args.name
    THERE.mkdir(parents=True, exist_ok=True)
    if not (run_dir / "checkpoint.pt").is_file():
        baselines("unpack-run", str(STAGE / args.name / f"{args.name}.manifest.json"), str(run_dir))
    command = train_command(run_dir, args.device, args.minutes)
    print(shlex.join(command), flush=True)
    if not args.background:
        run(*command)
        return
    output = THERE / f"{args.name}.out"
    with open(output, "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    (THERE / f"{args.name}.pid").write_text(str(process.pid), encoding="utf-8")
    for _ in range(STARTUP_SECONDS):  # a run that cannot start says so in this call, not the next
        if process.poll() is not None:
            break
        time.sleep(1)
    if process.returncode not in (None, 0):
        tail = output.read_text(encoding="utf-8").strip().splitlines()[-1:]
        raise LegError(f"the training stopped at once (exit status {process.returncode}): {' '.join(tail)}")
    print(f"training in the background (pid {process.pid}, log {output})")


def wait_for(name: str) -> None:
    """Wait for a background ``train`` of ``name`` to exit, then show the end of its output."""
    pid_file = THERE / f"{name}.pid"
    if not pid_file.is_file():
        return
    pid = int(pid_file.read_text(encoding="utf-8"))
    while _alive(pid):
        time.sleep(2)
    pid_file.unlink()
    print((THERE / f"{name}.out").read_text(encoding="utf-8")[-2000:], flush=True)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (an exited one that nobody has reaped does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0] == "Z")


def command_pack(args: argparse.Namespace) -> None:
    back = THERE / "back"
    back.mkdir(parents=True, exist_ok=True)
    for name in args.names:
        wait_for(name)
        run_dir = THERE / "runs" / name
        without_best = () if (run_dir / "best.pt").is_file() else ("--without-best",)
        baselines("pack-run", str(run_dir), str(back), "--precision", "float16", *without_best)
    deliver(back, args.out)


def deliver(back: Path, out: Path) -> None:
    """Move into ``out`` the files of ``back`` that the limits let through, manifests first; say
    what is left for ``fetch``."""
    waiting = sorted(back.iterdir(), key=lambda path: (not path.name.endswith(".json"), path.name))
    sent = total = 0
    for path in waiting:
        size = path.stat().st_size
        if size > BACK_FILE_LIMIT:
            raise LegError(f"{path} is {size} bytes, over the limit of one file")
        if sent == BACK_FILES or total + size > BACK_LIMIT:
            break
        shutil.move(path, out / path.name)
        sent, total = sent + 1, total + size
    left = list(back.iterdir())
    print(f"{sent} file(s), {total / 2**20:.1f} MiB into $OUT; {len(left)} left", end="")
    print(": run `python tools/device_leg.py fetch --out $OUT` next" if left else "")


def command_fetch(args: argparse.Namespace) -> None:
    if not (THERE / "back").is_dir():
        raise LegError(f"nothing to fetch: no {THERE / 'back'} on this machine (a fresh one?)")
    deliver(THERE / "back", args.out)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    send = commands.add_parser("send", help="here: pack the runs and slim what travels")
    send.add_argument("run_dirs", nargs="+", type=Path)
    send.add_argument(
        "--device-minutes",
        type=positive_minutes,
        default=15.0,
        help="device time left (the tool's status; default 15)",
    )
    send.set_defaults(handler=command_send)
    train = commands.add_parser("train", help="there: unpack a run and train it")
    train.add_argument("name")
    train.add_argument("--minutes", type=positive_minutes, required=True)
    train.add_argument("--device", default="cuda")
    train.add_argument("--background", action="store_true")
    train.set_defaults(handler=command_train)
    pack = commands.add_parser("pack", help="there: wait for the runs, pack them, fill $OUT")
    pack.add_argument("names", nargs="+")
    pack.add_argument("--out", type=existing_folder, required=True)
    pack.set_defaults(handler=command_pack)
    fetch = commands.add_parser("fetch", help="there: the pieces `pack` left")
    fetch.add_argument("--out", type=existing_folder, required=True)
    fetch.set_defaults(handler=command_fetch)
    land = commands.add_parser("land", help="here: rebuild the runs from what came back")
    land.add_argument("--from", dest="folders", nargs="+", type=Path, required=True)
    land.add_argument("run_dirs", nargs="+", type=Path)
    land.set_defaults(handler=command_land)
    restore = commands.add_parser("restore", help="here: put git's index back")
    restore.set_defaults(handler=command_restore)
    try:
        args = parser.parse_args(argv)
        args.handler(args)
    except LegError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
