"""Bad input at the command line: Ctrl-C ends any command with one line and exit 130 (sent for real to a running
process, at a point it announces, so nothing races), flags are never abbreviated, output never goes into the
sources, a malformed kubeconfig is located, an unknown --base is refused. A fixture fleet of the tests' own."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest

from fleet.tools import interrupts
from fleet.tools.cli import main
from fleet.tools.interrupts import EXIT_INTERRUPTED, PAUSE_ENV
from tests.conftest import FIXTURES, ROOT

FLEET = FIXTURES / "fleet"
ON_FIXTURE = [
    "--policy",
    str(FLEET / "fleet.yaml"),
    "--stacks-dir",
    str(FLEET / "stacks"),
    "--workloads-dir",
    str(FLEET / "workloads"),
]
LEAF = "fix-eks"  # a cluster of the fixture fleet
WAIT_S = 120  # a generous bound for a loaded machine: the process is interrupted long before


def console_script() -> list[str]:
    """The ``fleet`` command as pip writes it from pyproject.toml's ``[project.scripts]`` (the script in .venv/bin is
    the installed project's, maybe not this checkout's)."""
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]["fleet"]
    module, _, function = entry.partition(":")
    return [sys.executable, "-c", f"import sys\nfrom {module} import {function}\nsys.exit({function}())"]


def interrupt_at(point: str, *args: str, command: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m fleet ARGS`` (or ``command`` ARGS), wait until it says it reached ``point``, send it SIGINT;
    what it did."""
    env = {**os.environ, PAUSE_ENV: point}
    proc = subprocess.Popen(
        [*(command or [sys.executable, "-m", "fleet"]), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # blocks until the line comes (or the process ends without it)
        seen.append(line)
        if line.startswith(f"gpu-fleet: paused at {point}"):
            break
    else:
        proc.wait(WAIT_S)
        pytest.fail(f"never reached {point}: {''.join(seen)}")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=WAIT_S)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize(
    ("point", "args"),
    [
        ("engine", ["plan", "--no-policy-pack", "--stack", LEAF, *ON_FIXTURE]),
        ("engine", ["render", "--stack", LEAF, *ON_FIXTURE, "--out", "{out}"]),
        ("command", ["validate", *ON_FIXTURE]),
        ("command", ["doctor", "--stack", LEAF, "--kubeconfig", "/dev/null", *ON_FIXTURE]),
        ("command", ["report", "--prometheus", "http://127.0.0.1:9", "--out", "{out}"]),
        ("command", ["affected", "--all", *ON_FIXTURE]),
    ],
    ids=["plan-in-engine", "render-in-engine", "validate", "doctor", "report", "affected"],
)
def test_ctrl_c_ends_any_command_with_one_line_and_130(tmp_path, point, args):
    out = tmp_path / "out"
    done = interrupt_at(point, *(a.replace("{out}", str(out)) for a in args))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert lines == [f"fleet {args[0]}: stopped by Ctrl-C (exit {EXIT_INTERRUPTED})"], done.stderr
    assert done.stdout == ""
    assert not out.exists() or not any(p for p in out.iterdir() if not p.name.startswith(".")), "nothing written"


@pytest.mark.parametrize("how", ["console-script", "module"])
def test_ctrl_c_while_the_modules_load_is_one_line_too(how):
    """The console script imported the command line before anything handled SIGINT: a Ctrl-C in its first second
    was a KeyboardInterrupt traceback and exit 1."""
    command = console_script() if how == "console-script" else [sys.executable, "-m", "fleet"]
    done = interrupt_at("import", "validate", *ON_FIXTURE, command=command)
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert done.stderr.strip().splitlines() == [f"fleet validate: stopped by Ctrl-C (exit {EXIT_INTERRUPTED})"]
    assert done.stdout == ""


def test_ctrl_c_in_process_returns_130_too(monkeypatch, capsys):
    """Called as a function (tests, the console script's tests), an interrupt is returned, not raised."""

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr("fleet.tools.cli.cmd_validate", interrupted)
    assert main(["validate", *ON_FIXTURE]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == f"fleet validate: stopped by Ctrl-C (exit {EXIT_INTERRUPTED})\n"


# A command whose work drops an object with a weakref callback while SIGINT is pending: the handler runs inside the
# callback, where Python prints an exception as "Exception ignored in ..." and drops it.
INTERRUPTED_IN_A_CALLBACK = """
import signal, sys, weakref
from pathlib import Path
from fleet.tools import cli

OUT = Path(sys.argv[1])

class Thing:
    pass

def validate(args):
    thing = Thing()
    ref = weakref.ref(thing, lambda gone: signal.raise_signal(signal.SIGINT))
    del thing  # the callback runs here, and the Ctrl-C's handler inside it
    OUT.write_text("the command went on", encoding="utf-8")
    return 0

cli.cmd_validate = validate
sys.argv = ["fleet", "validate"]
sys.exit(cli.main())
"""


def test_a_ctrl_c_landing_in_a_weakref_callback_still_ends_the_command(tmp_path):
    """A real SIGINT handled where exceptions are dropped (a weakref callback run by the garbage collector): `render`
    printed "Exception ignored ... KeyboardInterrupt", went on writing and exited 0, about one run in six."""
    written = tmp_path / "written"
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_IN_A_CALLBACK, str(written)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert done.stderr.splitlines() == [f"fleet validate: stopped by Ctrl-C (exit {EXIT_INTERRUPTED})"], done.stderr
    assert not written.exists(), "the command stopped at the interrupt"


# The command line's end as the console script reaches it: the command returned 3, Python is about to end.
AFTER_THE_COMMAND = """
import atexit, os, signal, sys, threading
from fleet.tools import interrupts

interrupts.install()
if sys.argv[1] == "while-python-ends":
    # atexit runs last in, first out: this runs after finished()'s own exit hook, as Python's teardown does
    atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), print("python ended", flush=True)))
    interrupts.finished(3)
    sys.exit(3)
release = threading.Event()
threading.Thread(target=release.wait).start()  # a thread Python would wait for at exit
try:
    interrupts.finished(3)
    os.kill(os.getpid(), signal.SIGINT)
    print("went on", flush=True)
finally:  # not reached when the Ctrl-C ends the process; else the thread must not hold the test up
    release.set()
"""


@pytest.mark.parametrize(("when", "expected"), [("while-python-ends", "python ended\n"), ("while-a-thread-runs", "")])
def test_a_ctrl_c_once_the_command_is_done_keeps_its_status(when, expected):
    """A render interrupted while Python ended it was killed by SIGINT without a line (exit -2, 2 of 11 near its
    end): once the work is done, a Ctrl-C ends the process at once with the command's status, and is ignored once
    Python tears down (where it would restore SIGINT's default)."""
    done = subprocess.run(
        [sys.executable, "-c", AFTER_THE_COMMAND, when], cwd=ROOT, capture_output=True, text=True, timeout=WAIT_S
    )
    assert done.returncode == 3 and done.stdout == expected, done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr


def test_a_command_that_returns_after_a_ctrl_c_still_ends_as_interrupted(monkeypatch, capsys):
    """A library that catches the KeyboardInterrupt and carries on: the command's success is not reported."""
    monkeypatch.setattr(interrupts, "_interrupted", threading.Event())

    def swallowing(args: object) -> int:
        interrupts._interrupted.set()  # what the SIGINT handler does before raising
        return 0

    monkeypatch.setattr("fleet.tools.cli.cmd_validate", swallowing)
    assert main(["validate", *ON_FIXTURE]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == f"fleet validate: stopped by Ctrl-C (exit {EXIT_INTERRUPTED})\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["validate", "--stack", "x"],
            "'--stack' is not an option of validate (did you mean '--stacks-dir'?); its options: --help",
        ),
        (["plan", "--stakc", "x"], "'--stakc' is not an option of plan (did you mean '--stack'?)"),
        (["plan", "--polic", "p.yaml"], "(did you mean '--policy'?)"),
        (["render", "--ou", "x"], "the following arguments are required: --out"),
        (["validate", "extra"], "unexpected argument 'extra': validate takes options only"),
        (["render", "--out", ""], "argument --out: is empty: give a path, such as out/"),
        (["plan", "--json", " "], "argument --json: is empty: give a path"),
        (["validate", "--policy", ""], "argument --policy: is empty: give a path"),
    ],
)
def test_flags_are_never_abbreviated(capsys, args, expected):
    """`--stack` was silently taken as `--stacks-dir` by argparse's abbreviations; an empty path (`--out ""`, an
    unset shell variable) was taken for the current folder (`--out . holds files that no render wrote`)."""
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and expected in err, err


@pytest.mark.parametrize(
    "command",
    [
        ["plan", "--no-policy-pack", "--stack", "fix-eksx", "fix-gkee"],
        ["render", "--out", "{out}", "--stack", "fix-eksx", "fix-gkee"],
        ["doctor", "--kubeconfig", "/dev/null", "--stack", "fix-eksx"],
    ],
    ids=["plan", "render", "doctor"],
)
def test_a_stack_the_policy_does_not_have_is_named_with_the_nearest(tmp_path, capsys, command):
    """It was `fleet.yaml:1: clusters: no cluster named ...`: the flag the user typed, and no near miss."""
    out = tmp_path / "out"
    assert main([*(a.replace("{out}", str(out)) for a in command), *ON_FIXTURE]) == 2
    err = capsys.readouterr().err
    assert "fleet.yaml:1: --stack: no cluster named 'fix-eksx' in the policy (did you mean 'fix-eks'?); its " in err
    if command[0] != "doctor":  # every name at once
        assert "--stack: no cluster named 'fix-gkee' in the policy (did you mean 'fix-gke'?)" in err, err
    assert "Traceback" not in err and not out.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["render", "--out", str(ROOT / "policy")], "is inside the repository's own policy/"),
        (["render", "--out", str(ROOT / "workloads" / "new")], "is inside the repository's own workloads/"),
        (["render", "--out", str(ROOT)], "is the repository itself"),
        (["plan", "--json", str(ROOT / "policy" / "fleet.yaml")], "--json: is inside the repository's own policy/"),
        (["report", "--prometheus", "http://127.0.0.1:9", "--out", str(ROOT / "docs")], "own docs/"),
    ],
    ids=["render-policy", "render-new-in-workloads", "render-root", "plan-json", "report"],
)
def test_output_never_goes_into_the_sources(capsys, args, expected):
    before = sorted(p.name for p in (ROOT / "policy").iterdir())
    assert main([*args, *(ON_FIXTURE[:2] if args[0] != "report" else [])]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err, err
    assert sorted(p.name for p in (ROOT / "policy").iterdir()) == before
    assert not (ROOT / "workloads" / "new").exists()


def test_render_refuses_a_folder_of_other_files(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine\n", encoding="utf-8")
    assert main(["render", *ON_FIXTURE, "--out", str(tmp_path)]) == 2
    assert f"--out {tmp_path} holds files that no render wrote" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_render_into_its_own_earlier_output_is_fine(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["render", "--stack", LEAF, *ON_FIXTURE, "--out", str(out)]
    assert main(args) == 0
    assert main(args) == 0, capsys.readouterr().err  # the folder holds the render's lock: its own output


KUBECONFIG_CASES = {
    "syntax": ("apiVersion: v1\nclusters: [\n", ":3: --kubeconfig: YAML syntax error"),
    "empty": ("", ":1: is empty: expected a kubeconfig such as"),
    "list": ("- a\n- b\n", ":1: is not a kubeconfig: expected"),
    "contexts-not-a-list": ("apiVersion: v1\ncontexts: 5\n", ":2: contexts: must be a list of {name, context}"),
    "unknown-current-context": (
        "clusters: [{name: c, cluster: {server: 'https://10.0.0.1'}}]\n"
        "contexts: [{name: lab, context: {cluster: c, user: u}}]\n"
        "current-context: lba\n"
        "users: [{name: u, user: {token: t}}]\n",
        ":3: current-context: 'lba' is not a context of the file (did you mean 'lab'?) (its contexts: lab)",
    ),
    "context-names-no-cluster": (
        "clusters: [{name: c, cluster: {server: 'https://10.0.0.1'}}]\n"
        "contexts: [{name: lab, context: {cluster: d, user: u}}]\n"
        "current-context: lab\n"
        "users: [{name: u, user: {token: t}}]\n",
        ":2: contexts[0].context.cluster: context 'lab' names cluster 'd', which the file does not define",
    ),
}


@pytest.mark.parametrize("case", sorted(KUBECONFIG_CASES))
def test_a_malformed_kubeconfig_is_located(tmp_path, capsys, case):
    text, expected = KUBECONFIG_CASES[case]
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(text, encoding="utf-8")
    assert main(["doctor", "--stack", LEAF, "--kubeconfig", str(kubeconfig), *ON_FIXTURE]) == 2
    err = capsys.readouterr().err
    assert f"{kubeconfig}{expected}" in err and "Traceback" not in err, err
    assert "nothing was checked" in err


def test_a_device_as_kubeconfig_is_refused(capsys):
    assert main(["doctor", "--stack", LEAF, "--kubeconfig", "/dev/zero", *ON_FIXTURE]) == 2
    assert "/dev/zero:1: --kubeconfig: cannot read the kubeconfig: not a readable file" in capsys.readouterr().err


def test_affected_with_a_base_git_does_not_know_is_refused(capsys):
    """It previewed every stack and exited 0: a typo of a branch looked like a new branch."""
    assert main(["affected", "--base", "nosuchref", *ON_FIXTURE]) == 2
    err = capsys.readouterr().err
    assert "affected: --base nosuchref: no branch, tag or commit of that name" in err, err
    assert "such as main, origin/main or a commit id" in err


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    """`fleet cards | head`: the reader closes the pipe before the command writes; no traceback, SIGPIPE's status."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleet", "cards"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the command has printed anything: its first write finds no reader
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


# --- every bad input a new user tried, through the command line ---------------------------------------------------
# Issue #28's cases (tracebacks, inputs that could eat the machine, silent accepts, messages in a library's words) and
# more of the same kind, each on a copy of the fixture fleet: exit 2, the file, line and key with what was expected
# (an example or the nearest name), no traceback, and nothing written. Each case: (command, the change to the copy
# as FILE -> (old, new) or FILE -> whole text, the fragments expected on stderr).
ALIASES = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)
EKS = "stacks/Pulumi.fix-eks.yaml"
TRACKER = (FLEET / "workloads" / "tracker" / "workload.yaml").read_text(encoding="utf-8")
PROVIDERS = '  pulumi:disable-default-providers: ["*"]\n'
BAD_INPUTS: dict[str, tuple[list[str], dict[str, tuple[str, str] | str | bytes], list[str]]] = {
    "dev-zero-policy": (["validate", "--policy", "/dev/zero"], {}, ["/dev/zero:1: is not a regular file"]),
    "alias-bomb": (["validate"], {"fleet.yaml": ALIASES}, ["fleet.yaml:1: more than 100,000 values once the alias"]),
    "huge-policy": (["validate"], {"fleet.yaml": "#" * (1 << 21)}, ["fleet.yaml:1: the file is 2,097,152 bytes"]),
    "deep-nesting": (["validate"], {"fleet.yaml": "a: " + "[" * 100_000}, ["fleet.yaml:1: nested more than 64"]),
    "not-utf8": (["validate"], {"fleet.yaml": b"clusters: caf\xe9\n"}, ["fleet.yaml:1: not UTF-8 text: byte 0xe9"]),
    "configuration-not-config": (
        ["validate"],
        {EKS: ("config:", "configuration:")},
        [f"{EKS}:1: configuration: unknown top-level key of a stack file (did you mean 'config'?)", "such as config:"],
    ),
    "secure-123": (
        ["validate"],
        {EKS: (PROVIDERS, PROVIDERS + "  gpu-fleet:grafanaAdminPassword:\n    secure: 123\n")},
        [f"{EKS}:4: config.gpu-fleet:grafanaAdminPassword.secure:", "(a string such as v1:AAAA...)"],
    ),
    "no-disable-default-providers": (
        ["validate"],
        {EKS: (PROVIDERS, "")},
        [f"{EKS}:1: config.pulumi:disable-default-providers: missing: add pulumi:disable-default-providers: ["],
    ),
    "aws-region-contradicts": (
        ["validate"],
        {EKS: (PROVIDERS, PROVIDERS + "  aws:region: us-east-1\n")},
        [f"{EKS}:3: config.aws:region: 'us-east-1' contradicts the policy, which says 'eu-west-1' for fix-eks"],
    ),
    "stack-file-a-folder": (["validate"], {EKS: "folder"}, [f"{EKS}:1: is a folder, not a file"]),
    "region-us-east-99": (
        ["validate"],
        {"fleet.yaml": ("region: eu-west-1", "region: us-east-99")},
        ["fleet.yaml:30: clusters.aws.fix-eks.region: 'us-east-99' is not a region of Amazon EKS", "such as us-"],
    ),
    "gcp-zone-eastus": (
        ["validate"],
        {"fleet.yaml": ("zone: europe-west4-a", "zone: eastus")},
        ["fleet.yaml:16: clusters.gcp.fix-gke.zone: 'eastus' is not a zone of Google Kubernetes Engine", "such as"],
    ),
    "kubernetes-1.12": (
        ["validate"],
        {"fleet.yaml": ("defaults:\n", 'defaults:\n  kubernetes_version: "1.12"\n')},
        ["fleet.yaml:4: defaults.kubernetes_version: Kubernetes 1.12", 'such as kubernetes_version: "1.'],
    ),
    "federation-below-scrape": (
        ["validate"],
        {
            "fleet.yaml": (
                "\nclusters:\n",
                "\nmonitoring: {scrape_interval: 30s, federation_interval: 10s}\nclusters:\n",
            )
        },
        ["fleet.yaml:6: monitoring.federation_interval: 10s is below the scrape_interval 30s", "such as"],
    ),
    "scrape-zero": (
        ["validate"],
        {"fleet.yaml": ("\nclusters:\n", "\nmonitoring: {scrape_interval: 0s}\nclusters:\n")},
        ["fleet.yaml:6: monitoring.scrape_interval: expected a whole number of seconds, minutes or hours above zero"],
    ),
    "regex-words": (
        ["validate"],
        {"fleet.yaml": ("\nclusters:\n", "\nmonitoring: {scrape_interval: 30 seconds}\nclusters:\n")},
        ["monitoring.scrape_interval: expected a whole number of seconds, minutes or hours above zero, such as 30s"],
    ),
    "class-name-words": (
        ["validate"],
        {"fleet.yaml": ("    fix-lab:\n      gpus: [a100]\n", "    fix-lab: a100\n")},
        ["fleet.yaml:36: clusters.existing.fix-lab: expected a mapping of keys to values (key: value lines"],
    ),
    "true-as-a-count": (
        ["validate"],
        {"fleet.yaml": ("v100: {max_nodes: 3}", "v100: {max_nodes: true}")},
        ["fleet.yaml:12: clusters.openstack.fix-magnum.gpus.v100.max_nodes: expected a whole number, such as 2"],
    ),
    "unknown-cloud": (
        ["validate"],
        {"fleet.yaml": ("  aws:\n", "  amazon:\n")},
        ["fleet.yaml:28: clusters.amazon: unknown key; the keys allowed here: gcp, aws, azure, openstack, existing"],
    ),
    "empty-sample-log": (
        ["validate"],
        {"workloads/tracker/sample.log": ""},
        ["tracker/sample.log:1: is empty: put a real log of the workload's output here"],
    ),
    "stack-near-miss": (
        ["plan", "--no-policy-pack", "--stack", "fix-eksx"],
        {},
        ["fleet.yaml:1: --stack: no cluster named 'fix-eksx' in the policy (did you mean 'fix-eks'?)"],
    ),
    "render-into-policy": (
        ["render", "--out", str(ROOT / "policy")],
        {},
        ["render: --out", "is inside the repository's own policy/", "such as out/"],
    ),
    "affected-nosuchref": (
        ["affected", "--base", "nosuchref"],
        {},
        ["affected: --base nosuchref: no branch, tag or commit of that name", "such as main"],
    ),
    "affected-head-nosuchref": (
        ["affected", "--base", "HEAD", "--head", "nosuchref"],
        {},
        ["affected: --head nosuchref: no branch, tag or commit of that name", "such as HEAD"],
    ),
    "doctor-timeout-nan": (
        ["doctor", "--stack", LEAF, "--kubeconfig", "/dev/null", "--timeout", "nan"],
        {},
        ["--timeout: must be a positive number of seconds, such as 15, not nan"],
    ),
    "no-clusters": (
        ["validate"],
        {"fleet.yaml": "workloads: {}\n"},
        ["fleet.yaml:1: clusters: required key is missing: Cloud -> cluster name -> the cluster; each cluster is one"],
    ),
    "null-cluster-name": (
        ["validate"],
        {"fleet.yaml": ("    fix-lab:\n", "    ~:\n")},
        ["fleet.yaml:35: clusters.existing.None: expected text, such as a name in quotes, not an empty value (null)"],
    ),
    "kubeconfig-syntax": (
        ["doctor", "--stack", LEAF, "--kubeconfig", "{fleet}/kubeconfig"],
        {"kubeconfig": "apiVersion: v1\nclusters: [\n"},
        ["kubeconfig:3: --kubeconfig: YAML syntax error"],
    ),
    "pushed-not-json": (
        ["images", "--pushed", "{fleet}/fleet.yaml"],
        {},
        ["fleet.yaml:1: cannot read the pushed digests: not JSON", "such as {"],
    ),
    "report-concurrency-zero": (
        ["report", "--prometheus", "http://127.0.0.1:9", "--out", "{fleet}/out", "--concurrency", "0"],
        {},
        ["--concurrency: must be a whole number from 1 to 16, such as 4, not '0'"],
    ),
    "report-concurrency-word": (
        ["report", "--prometheus", "http://127.0.0.1:9", "--out", "{fleet}/out", "--concurrency", "many"],
        {},
        ["--concurrency: must be a whole number from 1 to 16, such as 4, not 'many'"],
    ),
    # Issue #48's cases: a lab's own fleet and a second corpus of bad inputs
    "yaml-python-tag": (
        ["validate"],
        {"fleet.yaml": ("  tracker: all", "  tracker: !!python/object/apply:os.system [ls]")},
        ["fleet.yaml:40: the YAML tag !!python/object/apply:os.system is not allowed", "remove the tag"],
    ),
    "null-and-misspelt-card-together": (
        ["validate"],
        {"fleet.yaml": ("  tracker: all", "  tracker: [t4, ~, a1000]")},
        [
            "fleet.yaml:40: workloads.tracker.gpus[1]: expected text",
            "fleet.yaml:40: workloads.tracker[2]: unknown card 'a1000' (did you mean 'a100'?)",
        ],
    ),
    "cluster-card-misspelt": (
        ["validate"],
        {"fleet.yaml": ("        l4: {}", "        l44: {}")},
        ["fleet.yaml:19: clusters.gcp.fix-gke.gpus.l44: unknown card 'l44' (did you mean 'l4'?)"],
    ),
    "gcp-project-invalid": (
        ["validate"],
        {"stacks/Pulumi.fix-gke.yaml": ("gcp:project: fixture-project", "gcp:project: My_Project")},
        ["Pulumi.fix-gke.yaml:3: config.gcp:project: 'My_Project' is not a Google Cloud project id", "such as"],
    ),
    "azure-subscription-not-a-guid": (
        ["validate"],
        {
            "stacks/Pulumi.fix-aks.yaml": (
                "subscriptionId: 11111111-2222-3333-4444-555555555555",
                "subscriptionId: lab-subscription",
            )
        },
        ["Pulumi.fix-aks.yaml:3: config.azure-native:subscriptionId: 'lab-subscription' is not an Azure subscription"],
    ),
    "kubeconfig-certificate-not-base64": (
        ["doctor", "--stack", LEAF, "--kubeconfig", "{fleet}/kubeconfig"],
        {
            "kubeconfig": "clusters: [{name: c, cluster: {server: 'https://10.0.0.1', certificate-authority-data: "
            "'not base64!'}}]\ncontexts: [{name: lab, context: {cluster: c, user: u}}]\ncurrent-context: lab\n"
            "users: [{name: u, user: {token: t}}]\n"
        },
        ["kubeconfig:1: clusters[0].cluster.certificate-authority-data: is not base64", "such as `base64 -w0"],
    ),
    "kubeconfig-exec-plugin-missing": (
        ["doctor", "--stack", LEAF, "--kubeconfig", "{fleet}/kubeconfig"],
        {
            "kubeconfig": "clusters: [{name: c, cluster: {server: 'https://10.0.0.1'}}]\n"
            "contexts: [{name: lab, context: {cluster: c, user: u}}]\ncurrent-context: lab\n"
            "users:\n- name: u\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
            "command: no-such-auth-plugin}\n"
        },
        ["kubeconfig:7: users[0].user.exec.command: the exec plugin 'no-such-auth-plugin' is not installed"],
    ),
    "pushed-unknown-image": (
        ["images", "--pushed", "{fleet}/pushed.json"],
        {"pushed.json": '{\n "ghcr.io/gpu-fleet/mtial:3.0.8": "sha256:' + "0" * 64 + '"\n}\n'},
        [
            "pushed.json:2: ghcr.io/gpu-fleet/mtial:3.0.8: is not an image of the fleet (did you mean "
            "'ghcr.io/gpu-fleet/mtail:3.0.8'?)"
        ],
    ),
    "pushed-md5-digest": (
        ["images", "--pushed", "{fleet}/pushed.json"],
        {"pushed.json": '{"ghcr.io/gpu-fleet/mtail:3.0.8": "md5:d41d8cd98f00b204e9800998ecf8427e"}\n'},
        ["pushed.json:1: ghcr.io/gpu-fleet/mtail:3.0.8: 'md5:d41d8cd98f00b204e9800998ecf8427e' is not a sha256"],
    ),
    "report-since-99999999d": (
        ["report", "--prometheus", "http://127.0.0.1:9", "--out", "{fleet}/out", "--since", "99999999d"],
        {},
        ["--since 99999999d: a report covers at most 3660d", "such as --since 180d"],
    ),
    "sample-log-utf-16": (
        ["validate"],
        {"workloads/tracker/sample.log": "tracker throughput=1.5\n".encode("utf-16")},
        ["tracker/sample.log:1: is UTF-16 text, and mtail reads UTF-8 only", "iconv -f UTF-16 -t UTF-8"],
    ),
    "sample-log-latin-1": (
        ["validate"],
        {"workloads/tracker/sample.log": b"tracker throughput=1.5\ncaf\xe9 ok\n"},
        ["tracker/sample.log:2: is not UTF-8 (byte 0xe9)", "such as Latin-1", "iconv -f LATIN1 -t UTF-8"],
    ),
    "headline-match-never-in-the-sample": (
        ["validate"],
        {
            "workloads/tracker/workload.yaml": TRACKER.replace(
                "    help: Throughput of the last run.\n",
                "    help: Throughput of the last run.\n    labels: [device]\n",
            ).replace("  unit: items/s\n", "  unit: items/s\n  match: {device: gpu9}\n"),
            "workloads/tracker/mtail/tracker.mtail": (
                "gauge tracker_throughput\n",
                "gauge tracker_throughput by device\n",
            ),
            "workloads/tracker/sample.log": "tracker throughput=1.5 device=gpu0\n",
        },
        ["tracker/workload.yaml:", "headline: match device: 'gpu9' never appears in sample.log"],
    ),
    "mtail-program-not-named-after-the-workload": (
        ["validate"],
        {"workloads/tracker/mtail/resnet50.mtail": "# the lab's other program\n"},
        [
            "tracker/mtail/resnet50.mtail:1: the workload's mtail program is one file named after it, "
            "mtail/tracker.mtail"
        ],
    ),
    "upstream-moving-tag": (
        ["validate"],
        {
            "workloads/tracker/workload.yaml": (
                "image: fixture-tracker:1.0.0\n",
                "image: fixture-tracker:1.0.0\nupstream: docker.io/library/python:latest\n",
            )
        },
        ["tracker/workload.yaml:5: upstream: docker.io/library/python:latest is not an exact version"],
    ),
    "dockerfile-unpinned-base-and-root": (
        ["validate"],
        {"workloads/tracker/Dockerfile": "FROM python\nRUN pip install tracker\n"},
        [
            "tracker/Dockerfile:1: FROM: python has no exact version tag",
            "tracker/Dockerfile:2: USER: the image runs as root (no USER), its pods as run_as_user 1000",
        ],
    ),
}


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_every_bad_input_ends_in_a_located_message_exit_2_and_nothing_written(tmp_path, capsys, case):
    command, changes, expected = BAD_INPUTS[case]
    fleet = tmp_path / "fleet"
    shutil.copytree(FLEET, fleet)
    for name, change in changes.items():
        path = fleet / name
        if change == "folder":
            path.unlink()
            path.mkdir()
        elif isinstance(change, tuple):
            text = path.read_text(encoding="utf-8")
            assert change[0] in text, (name, change)
            path.write_text(text.replace(change[0], change[1], 1), encoding="utf-8")
        elif isinstance(change, bytes):
            path.write_bytes(change)
        else:
            path.write_text(change, encoding="utf-8")
    before = _files(tmp_path)
    policy_before = sorted(p.name for p in (ROOT / "policy").iterdir())
    inputs = ["--policy", str(fleet / "fleet.yaml"), "--stacks-dir", str(fleet / "stacks")]
    args = [a.replace("{fleet}", str(fleet)) for a in command]
    try:
        status = main([*args, *inputs[2 if "--policy" in args else 0 :], "--workloads-dir", str(fleet / "workloads")])
    except SystemExit as exc:  # argparse's refusals
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert status == 2, err
    for fragment in expected:
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    assert "Traceback" not in out + err
    assert _files(tmp_path) == before, "nothing written"
    assert sorted(p.name for p in (ROOT / "policy").iterdir()) == policy_before
