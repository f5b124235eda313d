"""The real tier's network: a namespace of its own with only loopback, so nothing a control plane calls leaves here.

An API server calls webhook and aggregated-API services at their cluster addresses (the tier's service range is
10.96.0.0/16, KWOK's pod addresses 10.0.0.0/24 and up): in a namespace whose one interface is ``lo``, no route leads
to them and every such call fails at once, whatever networks the machine itself is on.

``python -m tests.real.isolation COMMAND...`` runs COMMAND in a new network namespace (``unshare --net``; as a user
other than root with ``--user --map-root-user`` too) with ``lo`` up and nothing else, after checking that. The tier's
tests check it again (``only_loopback``) and refuse to run anywhere else.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

#: Set inside the namespace by ``main``; the tier's tests run only where it is set and ``only_loopback`` holds.
INSIDE_ENV = "GPU_FLEET_REAL_TIER"


def interfaces() -> list[str]:
    """The network interfaces of this process' network namespace (``/proc/net/dev`` follows the namespace, unlike
    ``/sys/class/net`` when sysfs was mounted outside it)."""
    lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    return sorted(line.split(":", 1)[0].strip() for line in lines if ":" in line)


def only_loopback() -> bool:
    """Whether this process' network namespace has ``lo`` and nothing else."""
    return interfaces() == ["lo"]


def _unshare_command() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        raise SystemExit("unshare (util-linux) is not installed: the real tier runs in a network namespace of its own")
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return [unshare, *user, "--net", "--"]


def _run_forwarding_termination(command: list[str], env: dict[str, str]) -> int:
    """Run ``command`` (which becomes the tier's pytest by exec) and wait for it; a SIGTERM or SIGHUP sent to this
    process (a CI job cancelled, ``kill`` of the make) is passed on as SIGINT, so pytest runs its finalizers and stops
    every control plane by its PID instead of being left behind."""
    child = subprocess.Popen(command, env=env)

    def forward(signum: int, frame: object) -> None:
        child.send_signal(signal.SIGINT)

    for each in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(each, forward)
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:  # Ctrl-C reached the child too (same process group): wait for its finalizers
            continue


def main(argv: list[str] | None = None) -> int:
    """Run the command in ``argv`` inside a new loopback-only network namespace; its exit status."""
    command = list(sys.argv[1:] if argv is None else argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("usage: python -m tests.real.isolation COMMAND...", file=sys.stderr)
        return 2
    if os.environ.get("_GPU_FLEET_IN_NEW_NETNS") != "1":
        env = {**os.environ, "_GPU_FLEET_IN_NEW_NETNS": "1"}
        inner = [sys.executable, "-m", "tests.real.isolation", *command]
        return _run_forwarding_termination([*_unshare_command(), *inner], env)
    ip = shutil.which("ip") or "/usr/sbin/ip"
    subprocess.run([ip, "link", "set", "lo", "up"], check=True)
    if not only_loopback():
        print(f"refusing to run: this network namespace has {', '.join(interfaces())}, not only lo", file=sys.stderr)
        return 2
    env = {**os.environ, INSIDE_ENV: "1"}
    env.pop("_GPU_FLEET_IN_NEW_NETNS")
    os.execvpe(command[0], command, env)
    return 0  # not reached


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
