"""Every example in README.md and in the documentation site (docs/*.md) runs, and shows
what the command prints.

Each page's fenced blocks are read in order:

- ``text`` blocks hold ``$ slackopt ...`` commands (a trailing ``\\`` continues a line)
  followed by lines of their output. Each command runs as a process in a scratch directory
  that holds a clean copy of the repository (what ``git ls-files`` lists, as a fresh
  clone has it; the ``slackopt`` package itself comes from the environment, as for an
  installed command), so a command that would write over a committed file is refused
  there as it is in a fresh clone; each output line shown must
  appear in what it prints: a table row cell by cell (cells under a ``planning`` column,
  and the ``planning_time_s`` row, are wall clock and not compared), any other line as
  text (whitespace and line wrapping do not matter).
- A block after ``<!-- readme-test: measured -->`` shows measured numbers: its table rows
  must exist (by their first cell), their values are not compared.
- A block after ``<!-- readme-test: slow ... -->`` runs for minutes: its commands are
  parsed by the command line (every option known and valid); a ``slackopt compare`` with
  ``--out`` (a sweep of the paper workloads) is then started in the clean copy as written
  and interrupted once its progress bar shows that it got past every check and began its
  runs (exit 130, nothing written); run once more with its output file already there, it
  must refuse to replace it (exit 2, one line).
- ``python`` blocks run in the same scratch directory, in order, after the text blocks
  before them (the PyTorch example reads the files the profile example wrote); the Hugging
  Face example runs in a fresh process, which must print nothing on stderr (transformers
  prints its warnings there, once per process).
- ``bash`` blocks are the install and test commands that built the environment these
  tests run in; they are checked to be exactly that.

Examples that need the ``[torch]`` extra are skipped where torch is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
"""The files whose examples run: the README and every page of the documentation site."""
WALL_CLOCK_COLUMNS = {"planning"}
WALL_CLOCK_ROWS = {"planning_time_s"}


@dataclass
class Block:
    page: str  # file name, e.g. "README.md" or "pytorch.md"
    lang: str
    line: int
    text: str
    marker: str  # "", "measured" or "slow"


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while not lines[j].startswith("```"):
            j += 1
        prev = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
        mk = re.match(r"<!-- readme-test: (\w+)", prev)
        out.append(Block(path.name, m.group(1), i + 1, "\n".join(lines[i + 1:j]),
                         mk.group(1) if mk else ""))
        i = j + 1
    return out


def commands(block: Block) -> list[tuple[list[str], list[str]]]:
    """(argv, output lines shown) per ``$ slackopt`` command of a text block."""
    out: list[tuple[list[str], list[str]]] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("$ "):
            cmd = lines[i][2:]
            while cmd.endswith("\\"):
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            out.append((shlex.split(cmd), []))
        elif out:
            out[-1][1].append(lines[i])
        i += 1
    return out


def cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"[│┃]", row)[1:-1]]


def is_row(line: str) -> bool:
    return line.startswith(("│", "┃"))


def squash(text: str) -> str:
    return " ".join(text.split())


def check_output(shown: list[str], printed: str, measured: bool) -> None:
    rows = [cells(ln) for ln in printed.splitlines() if is_row(ln.strip())]
    rows = [r for r in rows if r]
    header: list[str] = []
    for line in shown:
        if not is_row(line):
            assert squash(line) in squash(printed), f"not printed: {line!r}"
            continue
        want = cells(line)
        if line.startswith("┃"):
            header = want
        if measured:
            assert any(r[:1] == want[:1] for r in rows), f"no row {want[0]!r}"
            continue
        wild = {k for k, name in enumerate(header) if name in WALL_CLOCK_COLUMNS} \
            if line.startswith("│") else set()
        if want and want[0] in WALL_CLOCK_ROWS:
            wild = set(range(1, len(want)))

        def same(r: list[str], want: list[str] = want, wild: set[int] = wild) -> bool:
            return len(r) == len(want) and all(
                k in wild or a == b for k, (a, b) in enumerate(zip(r, want, strict=True)))

        assert any(same(r) for r in rows), f"no printed row matches {want}\nprinted:\n{printed}"


PACKAGES = ("slackopt", "solvers")
"""Source folders of the installed package: not copied (the environment's slackopt runs)."""


def tracked_files() -> list[str]:
    """The files a fresh clone holds (``git ls-files``), relative to the repository."""
    res = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                         timeout=60)
    if res.returncode != 0:
        pytest.skip("not a git checkout: the README's commands run from a clean clone")
    return [f for f in res.stdout.decode().split("\0") if f]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean copy of the repository: its tracked files as the working tree has them."""
    import shutil

    d = tmp_path_factory.mktemp("readme")
    for f in tracked_files():
        if f.split("/", 1)[0] in PACKAGES or not (ROOT / f).is_file():
            continue
        (d / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, d / f)
    return d


def needs_torch(block: Block) -> bool:
    return "profile" in block.text or "slackopt.torch" in block.text


ALL = [b for page in PAGES for b in blocks(page)]
TEXT = [b for b in ALL if b.lang == "text" and "$ slackopt" in b.text]
PYTHON = [b for b in ALL if b.lang == "python"]


def _id(b: Block) -> str:
    return f"{b.page}:{b.line}"


def test_the_readme_has_the_examples_this_test_runs() -> None:
    assert len(TEXT) >= 4 and len(PYTHON) >= 2
    assert sum(b.page == "README.md" for b in TEXT) >= 2
    markers = [b.marker for b in TEXT if b.marker]
    assert "slow" in markers and set(markers) <= {"measured", "slow"}, markers
    sweeps = [b for b in TEXT if b.marker == "slow" and any(
        a[1] == "compare" and "--out" in a for a, _ in commands(b))]
    assert sweeps  # a slow sweep that writes a file: started and interrupted, not run
    for b in ALL:
        assert b.lang in ("bash", "text", "python", "json", ""), (b.line, b.lang)


def test_the_install_and_test_commands_are_those_ci_runs() -> None:
    """README.md's two bash blocks are one line each: the install-and-run command, and
    the test command, which is the last line of .ci/run; a docs page may show the first
    one command per line (joined by ``&&``, a trailing ``\\`` continuing a line)."""
    install, test = (b.text for b in ALL if b.lang == "bash" and b.page == "README.md")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert test == ci and "\n" not in install and "pip install" in install
    for b in ALL:
        if b.lang == "bash" and b.page != "README.md":
            lines = b.text.replace("\\\n", " ").splitlines()
            assert " && ".join(" ".join(ln.split()) for ln in lines) == install, b.line


@pytest.mark.parametrize("block", [b for b in ALL if b.lang == "json"], ids=_id)
def test_json_examples_load_as_gpu_files(block: Block, tmp_path: Path) -> None:
    """The README's JSON example is a --gpu file of peaks: it must load as one."""
    from slackopt.hardware import gpu_from_file
    f = tmp_path / "gpu.json"
    f.write_text(block.text)
    gpu = gpu_from_file(str(f))
    data = json.loads(block.text)
    assert gpu.name == data["name"] and gpu.peak_flops == data["peak_flops"]


def _marked(bs: list[Block]) -> list:
    """The blocks as parameters, those that need the [torch] extra marked ``torch``."""
    return [pytest.param(b, marks=pytest.mark.torch) if needs_torch(b) else b for b in bs]


@pytest.mark.slow
@pytest.mark.parametrize("block", _marked(TEXT), ids=_id)
def test_command_examples(block: Block, scratch: Path) -> None:
    if needs_torch(block):
        pytest.importorskip("torch")
    for argv, shown in commands(block):
        assert argv[0] == "slackopt", argv
        if block.marker == "slow":
            import typer

            from slackopt.cli import app

            cmd = typer.main.get_command(app)
            with cmd.make_context("slackopt", argv[1:]) as ctx:
                sub = cmd.get_command(ctx, argv[1])
                sub.make_context(argv[1], argv[2:], parent=ctx)  # raises on a bad option
            if argv[1] == "compare" and "--out" in argv:
                start_and_interrupt(argv, scratch)
            continue
        tracked = set(tracked_files())
        for k, a in enumerate(argv[:-1]):  # files the examples write are fresh each run
            if a in ("-o", "--output") and argv[k + 1] not in tracked:  # never a clone's file
                (scratch / argv[k + 1]).unlink(missing_ok=True)
        res = subprocess.run([sys.executable, "-m", "slackopt.cli", *argv[1:]], cwd=scratch,
                             capture_output=True, text=True, timeout=600,
                             env={**os.environ, "COLUMNS": "200"})
        assert res.returncode == 0, res.stderr[-3000:]
        check_output(shown, res.stdout, measured=block.marker == "measured")


def start_and_interrupt(argv: list[str], cwd: Path) -> None:
    """Run a slow ``slackopt compare`` command as written in `cwd` until its progress bar
    shows (every check passed: options, inputs, the output file; the runs began), then
    Ctrl-C it: exit 130, one interrupt line, and no output file. Then with its output file
    there: refused, exit 2, one line, the file untouched."""
    import selectors
    import signal
    import time

    out = cwd / argv[argv.index("--out") + 1]
    assert argv[1] == "compare" and not out.exists(), (argv, out)
    env = {**os.environ, "COLUMNS": "200", "TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "slackopt.cli", *argv[1:]], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    err = b""
    end = time.monotonic() + 300
    while b" runs, " not in err and time.monotonic() < end and proc.poll() is None:
        if sel.select(timeout=1.0):
            err += os.read(proc.stderr.fileno(), 65536)
    started = b" runs, " in err
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=300)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", (err + rest).decode(errors="replace"))
    assert started, f"exit {proc.returncode} before its runs began:\n{text[-3000:]}"
    assert proc.returncode == 130, text[-3000:]
    assert text.strip().splitlines()[-1].startswith("slackopt: interrupted; "), text[-3000:]
    assert not out.exists()
    out.write_text("mine")
    res = subprocess.run([sys.executable, "-m", "slackopt.cli", *argv[1:]], cwd=cwd,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and res.stderr.splitlines() == [
        f"slackopt: error: {argv[argv.index('--out') + 1]}: file exists; pass --force to "
        "replace it, or choose another path"], res.stderr
    assert out.read_text() == "mine"
    out.unlink()


@pytest.mark.slow
@pytest.mark.parametrize("block", _marked(PYTHON), ids=_id)
def test_python_examples(block: Block, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if needs_torch(block):
        pytest.importorskip("torch")
        if not (scratch / "gpt-plan.json").exists():  # the profile example writes it
            prof = next(b for b in TEXT if needs_torch(b) and b.page == block.page)
            test_command_examples(prof, scratch)
    if "transformers." in block.text:  # in a fresh process: nothing on stderr
        res = subprocess.run([sys.executable, "-c", block.text + "\nprint(report.matches_plan())"],
                             cwd=scratch, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0 and res.stdout.splitlines()[-1] == "True", res.stderr
        assert res.stderr == "", res.stderr  # no warning (transformers logs them on stderr)
        return
    monkeypatch.chdir(scratch)
    namespace: dict = {"__name__": "__readme__"}
    exec(compile(block.text, _id(block), "exec"), namespace)  # noqa: S102
    if "compare(" in block.text and "__main__" not in block.text:  # "Your own solver"'s
        df = namespace["df"]                            # runs in tests/test_solver_contract
        assert len(df) == 6 and set(df["solver"]) == {"slackswap", "checkpoint", "genetic"}
    if "execute_plan" in block.text:
        assert namespace["report"].matches_plan()


def test_the_readme_lists_every_preset_and_workload() -> None:
    from slackopt.hardware import GPUS, LINKS
    from slackopt.workloads import WORKLOADS

    text = squash((ROOT / "docs" / "cli.md").read_text(encoding="utf-8"))
    assert f"GPU presets (`--gpu`): {', '.join(GPUS)}." in text
    assert f"Host-link presets (`--link`): {', '.join(LINKS)} " in text
    assert ", ".join(f"`{w}`" for w in WORKLOADS) in text
    res = subprocess.run([sys.executable, "-m", "slackopt.cli", "make", "--help"],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "300"})
    helptext = squash(res.stdout)
    # the help column wraps names at their hyphens ("shapes-" / "densenet")
    assert f"Workload name: {', '.join(WORKLOADS)}." in helptext.replace("- ", "-")
    assert f"GPU preset: {', '.join(GPUS)}." in helptext
    assert f"Host-link preset: {', '.join(LINKS)} " in helptext
