"""``python -m fleet``, and the ``fleet`` command ``make`` installs in .venv (pyproject.toml's ``[project.scripts]``
names ``run``): see fleet/tools/cli.py.

Ctrl-C, even while the modules load, ends it with one line and exit status 130 (fleet/tools/interrupts.py). Run
outside the project's virtualenv, a missing dependency (pydantic, pulumi, ...) is one line saying where the commands
run, with exit status 2, instead of a traceback.
"""

import sys

OUR_PACKAGES = ("fleet", "components", "policy")
EXIT_BAD_INPUT = 2


def missing_dependency(exc: ModuleNotFoundError) -> str | None:
    """The top-level package ``exc`` says is missing, unless it is one of ours (a bug, shown as such)."""
    top = (exc.name or "").split(".")[0]
    return None if not top or top in OUR_PACKAGES else top


def run() -> int:
    """``fleet.tools.cli.main``, or one line and exit 2 when a dependency is not installed in this Python."""
    try:
        from fleet.tools.interrupts import leave, pause_for_tests  # the standard library only: loads at once

        try:
            pause_for_tests("import")  # a test interrupts here, before the command line's modules load
            from fleet.tools.cli import main
        except KeyboardInterrupt:
            leave(" ".join(["fleet", *sys.argv[1:2]]))
        return main()
    except ModuleNotFoundError as exc:
        package = missing_dependency(exc)
        if package is None:
            raise
        name = "fleet" if sys.argv[0].rsplit("/", 1)[-1] == "fleet" else "python -m fleet"  # the console script's
        print(
            f"{name}: {package!r} is not installed in this Python ({sys.executable}): the commands run in "
            "the project's virtualenv. Run `make plan` once (it creates .venv), then `.venv/bin/fleet plan` or "
            "`.venv/bin/python -m fleet plan` (or `source .venv/bin/activate` and `fleet plan`)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(run())
