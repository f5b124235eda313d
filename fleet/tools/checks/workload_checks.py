"""Checks of the workload folders beyond their schema: each mtail program really exports what workload.yaml
declares, compiles under the real mtail, and turns the real sample log into every declared metric.

``validate`` and ``plan`` run them before planning. Without mtail on the machine the programs cannot be compiled
or run: that is said once (a note), and the static checks still run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from fleet.model.core.errors import InputError, Problem
from fleet.model.core.input_files import MAX_LOG_BYTES, read_input_bytes
from fleet.model.core.workloads import Workload
from fleet.model.core.yaml_source import read_yaml
from fleet.model.monitoring.prometheus import series_names

# `[hidden] counter|gauge|histogram NAME [by l1, l2] [buckets ...] [as "exported"]`, one per line (mtail's
# language, docs/Language.md of google/mtail).
DECLARATION = re.compile(r"^\s*(?P<hidden>hidden\s+)?(?P<type>counter|gauge|histogram)\s+(?P<name>\w+)(?P<rest>.*)$")
# A sample line of the Prometheus text format: the metric name first.
SAMPLE_NAME = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)[{ ]")
MTAIL_TIMEOUT_S = 30
# glog line prefixes (`I1123 09:12:33.123456   42 main.go:116] ...`): I and W lines are progress, not the error.
GLOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [^\]]+\] ")
GLOG_INFO = re.compile(r"^[IW]\d{4} ")
# A compile error as mtail prints it: `a.mtail:4:3-5: Identifier `bar' not declared.`
COMPILE_ERROR = re.compile(r"^(?P<file>[^\s:/]+\.mtail):(?P<line>\d+):(?P<col>[\d.-]+): (?P<msg>.+)$")
# mtail's own flags (google/mtail v3, cmd/mtail/main.go): no HTTP listener on a real port while checking.
MTAIL_QUIET = ["--logtostderr", "--address", "127.0.0.1", "--port", "0"]
NO_MTAIL_NOTE = "mtail is not installed: the mtail programs were not compiled or run (apt-get install mtail)"


def mtail_declarations(text: str) -> set[tuple[str, str, tuple[str, ...]]]:
    """(exported name, type, labels) of every metric an mtail program declares, hidden ones left out."""
    out = set()
    for line in text.splitlines():
        found = DECLARATION.match(line.split("#", 1)[0])
        if not found or found["hidden"]:
            continue
        rest = found["rest"]
        alias = re.search(r'\bas\s+"([^"]+)"', rest)
        by = re.search(r"\bby\s+(.+?)\s*(?:\bbuckets\b|\bas\s+\"|$)", rest)
        labels = tuple(label.strip() for label in by[1].split(",")) if by else ()
        out.add((alias[1] if alias else found["name"], found["type"], labels))
    return out


def _problem(wl: Workload, key: str, message: str) -> Problem:
    path = wl.folder / "workload.yaml"
    try:
        return read_yaml(path).problem((key,), message)
    except InputError:
        return Problem(str(path), 1, key, message)


def compile_error(stderr: str) -> str:
    """What mtail says is wrong, without its log prefix: glog's I/W lines (version banner, progress) are skipped."""
    lines = [line for line in stderr.splitlines() if line.strip() and not GLOG_INFO.match(line)]
    text = " ".join(GLOG_PREFIX.sub("", line).strip() for line in lines) or "no message"
    return text[:400]


def compile_problems(stderr: str, folder: Path) -> list[Problem]:
    """mtail's compile errors located at the program and line they name (``a.mtail:4:3-5: Identifier `bar' not
    declared.``, google/mtail internal/runtime/compiler/errors: ``file:line:col: message``), each with the lines that
    follow it (mtail's hints); what names no program is placed at the folder."""
    out: list[Problem] = []
    text = [GLOG_PREFIX.sub("", line).strip() for line in stderr.splitlines() if not GLOG_INFO.match(line)]
    for line in text:
        found = COMPILE_ERROR.match(line)
        if found:
            out.append(
                Problem(str(folder / found["file"]), int(found["line"]), "", f"mtail cannot compile it: {found['msg']}")
            )
        elif out and line and not line.startswith("compile failed for"):
            last = out[-1]
            out[-1] = Problem(last.file, last.line, last.path, f"{last.message} {line}")
    return out or [Problem(str(folder), 1, "", f"mtail --compile_only fails: {compile_error(stderr)}")]


def program_name_problems(wl: Workload) -> list[Problem]:
    """The workload's mtail program is one, ``mtail/<workload>.mtail``: mtail names a program by its file in its
    logs and its own metrics (``prog`` label), so the name says whose it is."""
    wanted = f"{wl.name}.mtail"
    return [
        Problem(
            str(wl.folder / "mtail" / name),
            1,
            "",
            f"the workload's mtail program is one file named after it, mtail/{wanted}: rename it (or merge it into "
            f"mtail/{wanted}); mtail names each program by its file in its logs and metrics",
        )
        for name in sorted(wl.mtail_programs)
        if name != wanted
    ]


# An exact version tag of an image (1.2, v1.2.3, 12.4.1-base-ubuntu22.04), not a moving one (latest, demo, 12).
EXACT_TAG = re.compile(r":v?\d+\.\d+(\.\d+)?(-[\w.-]+)?$")
FROM_LINE = re.compile(r"^FROM\s+(?:--\S+\s+)*(?P<image>\S+)(?:\s+AS\s+(?P<stage>\S+))?", re.IGNORECASE)
USER_LINE = re.compile(r"^USER\s+(?P<user>\S+)", re.IGNORECASE)
REF_ARG = re.compile(r"^ARG (?P<arg>\w+_REF)=(?P<ref>[0-9a-f]{40})$")


def _tag_of(image: str) -> str:
    """The tag of an image reference, its digest left out (``''`` without one)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return ":" + last.rsplit(":", 1)[1] if ":" in last else ""


def upstream_problems(wl: Workload) -> list[Problem]:
    """The image a workload copies is published under an exact version (a moving tag would copy whatever it points
    at that day)."""
    upstream = wl.spec.upstream
    if not upstream or EXACT_TAG.search(_tag_of(upstream)):
        return []
    return [
        _problem(
            wl,
            "upstream",
            f"{upstream} is not an exact version: name the published image by its version tag, such as "
            "docker.io/pyhf/cuda:0.6.1-jax-cuda-11.1 (the images workflow records its digest)",
        )
    ]


def dockerfile_problems(wl: Workload) -> list[Problem]:
    """A workload built here builds the same image every time and runs as its pods' user: each base image by an
    exact version tag, an upstream repository fetched by a full commit (``ARG <NAME>_REF=<40 hex digits>`` and
    ``git fetch ... "${<NAME>_REF}"``), and the last ``USER`` the pods' ``run_as_user`` unless it ``needs_root``."""
    path = wl.folder / "Dockerfile"
    if not path.is_file():
        return []
    try:
        lines = read_input_bytes(path, what="Dockerfile").decode("utf-8").splitlines()
    except (InputError, UnicodeDecodeError) as exc:
        return exc.problems if isinstance(exc, InputError) else [Problem(str(path), 1, "", "is not UTF-8 text")]
    problems: list[Problem] = []
    stages: set[str] = set()
    users: list[tuple[int, str]] = []
    refs: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        found = FROM_LINE.match(line.strip())
        if found:
            image = found["image"]
            if image not in stages and image != "scratch" and not EXACT_TAG.search(_tag_of(image)):
                problems.append(
                    Problem(
                        str(path),
                        number,
                        "FROM",
                        f"{image} has no exact version tag: pin the base image, such as "
                        "FROM nvidia/cuda:12.4.1-base-ubuntu22.04",
                    )
                )
            if found["stage"]:
                stages.add(found["stage"])
        user = USER_LINE.match(line.strip())
        if user:
            users.append((number, user["user"]))
        ref = REF_ARG.match(line.strip())
        if ref:
            refs.append((number, ref["arg"]))
    text = "\n".join(lines)
    if not wl.spec.needs_root:
        uid = str(wl.spec.run_as_user)
        if not users or users[-1][1].split(":")[0] != uid:
            where, said = users[-1] if users else (len(lines) or 1, "root (no USER)")
            problems.append(
                Problem(
                    str(path),
                    where,
                    "USER",
                    f"the image runs as {said}, its pods as run_as_user {uid}: end the Dockerfile with USER "
                    f"{uid}:{uid} (or set needs_root in workload.yaml, saying why)",
                )
            )
    if re.search(r"\bgit\b[^\n]*\bfetch\b", text):
        if not refs:
            problems.append(
                Problem(
                    str(path),
                    1,
                    "ARG",
                    "fetches a git repository without a pinned commit: add ARG <NAME>_REF=<the full 40-hex commit> "
                    'and git fetch origin "${<NAME>_REF}"',
                )
            )
        for number, arg in refs:
            if not re.search(rf'fetch [^\n]*"\$\{{{arg}\}}"', text):
                problems.append(
                    Problem(str(path), number, arg, f'is not what git fetches: git fetch origin "${{{arg}}}"')
                )
    return problems


def static_problems(wl: Workload) -> list[Problem]:
    """What needs no mtail: the declared metrics are the programs' own, and the sample log is there and whole."""
    problems = program_name_problems(wl) + upstream_problems(wl) + dockerfile_problems(wl)
    declared = {(m.name, m.type, tuple(m.labels)) for m in wl.spec.metrics}
    program = set().union(*(mtail_declarations(text) for text in wl.mtail_programs.values()))
    for name, type_, labels in sorted(declared - program):
        problems.append(
            _problem(wl, "metrics", f"{type_} {name} by {list(labels)} is declared but no mtail program exports it")
        )
    for name, type_, labels in sorted(program - declared):
        problems.append(
            _problem(wl, "metrics", f"the mtail program exports {type_} {name} by {list(labels)}: declare it here")
        )
    log = wl.sample_log
    if not log.exists():
        problems.append(Problem(str(log), 1, "", "missing: every workload ships a real sample log of its output"))
        return problems
    try:
        text = read_input_bytes(log, MAX_LOG_BYTES, "sample log")
    except InputError as exc:
        return problems + exc.problems
    encoding = encoding_problem(text)
    if encoding is not None:
        problems.append(Problem(str(log), encoding[0], "", encoding[1]))
    elif not text.strip():
        problems.append(
            Problem(str(log), 1, "", "is empty: put a real log of the workload's output here (the lines mtail parses)")
        )
    elif not text.endswith(b"\n"):
        line = text.count(b"\n") + 1
        problems.append(Problem(str(log), line, "", "the last line has no newline: mtail never reads it"))
    else:
        problems += headline_match_problems(wl, text.decode("utf-8"))
    return problems


# Byte-order marks of the UTF-16 and UTF-32 encodings (the Unicode standard, "Byte Order Mark"): the longer first.
BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def encoding_problem(text: bytes) -> tuple[int, str] | None:
    """(line, message) when the sample log is not UTF-8 text, which is all mtail reads, naming the encoding it
    looks like (UTF-16 or UTF-32 by its byte-order mark or NUL bytes, else a one-byte one such as Latin-1)."""
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = text.count(b"\n", 0, exc.start) + 1
        wide = next((name for bom, name in BOMS if text.startswith(bom)), None)
        if wide is None and text[:200].count(b"\x00") > len(text[:200]) // 4:
            wide = "UTF-16"
        if wide:
            return 1, f"is {wide} text, and mtail reads UTF-8 only: convert it, such as iconv -f {wide} -t UTF-8"
        return line, (
            f"is not UTF-8 (byte 0x{text[exc.start]:02x}), and mtail reads UTF-8 only: it looks like a one-byte "
            "encoding such as Latin-1; convert it, such as iconv -f LATIN1 -t UTF-8"
        )
    return None


def headline_match_problems(wl: Workload, text: str) -> list[Problem]:
    """The headline's ``match`` values each appear in the sample log: a value the log never prints (a misspelt
    stage) would pick no series, and the reports and dashboards would have no headline."""
    headline = wl.spec.headline
    missing = {k: v for k, v in headline.match.items() if not re.search(rf"(?<![\w.-]){re.escape(v)}(?![\w.-])", text)}
    return [
        _problem(
            wl,
            "headline",
            f"match {label}: {value!r} never appears in sample.log, so it would pick no series of "
            f"{headline.metric}: use a value the workload prints there",
        )
        for label, value in sorted(missing.items())
    ]


@lru_cache(maxsize=64)
def _run_mtail(
    mtail: str, progs: str, programs_key: tuple[tuple[str, str], ...], log: str | None, log_key: bytes = b""
) -> tuple[int, str]:
    """(exit status, output) of mtail compiling ``progs`` or, with a log, running them once over it; cached by the
    programs' and the log's content, so a process that checks the fleet many times runs mtail once per workload."""
    args = ["--compile_only"] if log is None else ["--one_shot", "--one_shot_format=prometheus", "--logs", log]
    try:
        run = subprocess.run(
            [mtail, *args, "--progs", progs, *MTAIL_QUIET],
            capture_output=True,
            text=True,
            timeout=MTAIL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return run.returncode, run.stdout if log is not None and run.returncode == 0 else run.stderr


def mtail_problems(wl: Workload, mtail: str) -> list[Problem]:
    """The programs compile, and one run over the sample log yields every declared metric."""
    progs = str(wl.folder / "mtail")
    key = tuple(sorted(wl.mtail_programs.items()))
    status, output = _run_mtail(mtail, progs, key, None)
    if status != 0:
        return compile_problems(output, wl.folder / "mtail")
    try:
        log = read_input_bytes(wl.sample_log, MAX_LOG_BYTES, "sample log")
    except InputError:
        return []  # reported by static_problems
    if not log.strip():
        return []  # empty: reported by static_problems
    status, output = _run_mtail(mtail, progs, key, str(wl.sample_log), log)
    if status != 0:
        return [Problem(str(wl.sample_log), 1, "", f"mtail --one_shot over the sample fails: {output[:300]}")]
    exported = {m["name"] for m in map(SAMPLE_NAME.match, output.splitlines()) if m}
    # a histogram is exported as its _bucket, _sum and _count series, never under its own name
    missing = sorted(m.name for m in wl.spec.metrics if m.in_sample and not set(series_names(m)) <= exported)
    problems = []
    if missing:
        problems.append(
            Problem(
                str(wl.sample_log),
                1,
                "",
                f"yields no {', '.join(missing)}: the sample or the program is off (a metric the run does not "
                "produce, such as an error counter, is declared with in_sample: false)",
            )
        )
    headline = wl.spec.headline
    if headline.match and not missing:
        wanted = [f'{k}="{v}"' for k, v in sorted(headline.match.items())]
        lines = [line for line in output.splitlines() if line.startswith(headline.metric)]
        if not any(all(w in line for w in wanted) for line in lines):
            problems.append(
                _problem(
                    wl,
                    "headline",
                    f"match {', '.join(wanted)} picks no series of {headline.metric} from the sample log: use label "
                    "values the program exports",
                )
            )
    return problems


def check_workloads(workloads: dict[str, Workload], mtail: str | None = None) -> tuple[list[Problem], list[str]]:
    """(problems, notes) of every workload folder; ``mtail``: the binary, found on PATH when not given."""
    mtail = mtail or shutil.which("mtail")
    problems: list[Problem] = []
    for wl in workloads.values():
        problems += static_problems(wl)
        if mtail:
            problems += mtail_problems(wl, mtail)
    return problems, ([] if mtail else [NO_MTAIL_NOTE])
