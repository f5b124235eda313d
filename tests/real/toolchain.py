"""The real receivers of the real tier, built from the Go modules pinned under ``receivers/``.

``python -m tests.real.toolchain build`` builds whatever is missing into a cache outside the repository, one folder
per module keyed by its go.mod, go.sum and sources (``GPU_FLEET_RECEIVERS_CACHE``, default
``~/.cache/gpu-fleet/receivers``); ``python -m tests.real.toolchain path`` prints the folders for ``PATH``. Each module
is built with the Go toolchain its go.mod names (``toolchain``), which ``go`` fetches from the module proxy when it is
not the machine's: a kube-apiserver v1.36 built with Go 1.27 serves a broken OpenAPI document (shared/README.md).
Nothing is vendored: ``go`` reads every module from the proxy and checks it against go.sum.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECEIVERS = ROOT / "receivers"

# The provider module's pseudo-version is the commit of the upstream tag v4.25.0 (pulumi/pulumi-kubernetes,
# `git tag --contains f47bc2d6f1996444d11c12b4ef083b82585f7c07`); upstream's release build sets this variable.
KUBERNETES_PROVIDER_VERSION = "4.25.0"
PROVIDER_MODULE = "github.com/pulumi/pulumi-kubernetes/provider/v4"
PROVIDER_VERSION_VAR = f"{PROVIDER_MODULE}/pkg/version.Version"
PULUMI_VERSION_VAR = "github.com/pulumi/pulumi/sdk/v3/go/common/version.Version"
PROVIDER_MAIN = RECEIVERS / "pulumi-kubernetes" / "cmd" / "pulumi-resource-kubernetes"

# Bumped when the recipe below changes in a way that changes the binaries.
RECIPE = "1"


@dataclass(frozen=True)
class Module:
    """One Go module of ours under receivers/ and the binaries built from it."""

    name: str
    packages: tuple[str, ...]  # what `go build` is given, in the module's folder
    binaries: tuple[str, ...]  # the files it leaves, after the renames
    renames: dict[str, str] = field(default_factory=dict)  # go's default output name -> ours
    ldflags: tuple[str, ...] = ()

    @property
    def folder(self) -> Path:
        """The module's folder in the repository."""
        return RECEIVERS / self.name

    def toolchain(self) -> str:
        """The Go toolchain the module's go.mod names (``toolchain goX.Y.Z``)."""
        found = re.search(r"^toolchain (go\S+)$", (self.folder / "go.mod").read_text(), re.MULTILINE)
        if not found:
            raise SystemExit(f"{self.folder / 'go.mod'}: no toolchain line (e.g. 'toolchain go1.26.8')")
        return found.group(1)

    def key(self) -> str:
        """A digest of everything that decides the binaries: go.mod, go.sum, our Go sources, the recipe."""
        digest = hashlib.sha256(RECIPE.encode())
        for path in sorted(self.folder.rglob("*")):
            if path.is_file() and (path.suffix == ".go" or path.name in {"go.mod", "go.sum"}):
                digest.update(path.relative_to(self.folder).as_posix().encode() + b"\0" + path.read_bytes())
        digest.update(" ".join(self.ldflags).encode())
        return digest.hexdigest()[:16]


def required_version(module: str, path: str) -> str:
    """The version ``receivers/<module>/go.mod`` requires of module ``path``."""
    text = (RECEIVERS / module / "go.mod").read_text()
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(path)} (v\S+)", text, re.MULTILINE)
    if not found:
        raise SystemExit(f"{RECEIVERS / module / 'go.mod'}: requires no {path}")
    return found.group(1)


def _kubernetes_version_flags() -> tuple[str, ...]:
    """What Kubernetes' own build (hack/lib/version.sh kube::version::ldflags) stamps into its binaries: without it
    they report v0.0.0-master, and clients that compare the server's version (the Kubernetes provider among them)
    take it for an old one."""
    version = required_version("kubernetes", "k8s.io/kubernetes")
    major, minor = version.removeprefix("v").split(".")[:2]
    flags = []
    for package in ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version"):
        flags += [f"-X {package}.gitVersion={version}", f"-X {package}.gitMajor={major}"]
        flags += [f"-X {package}.gitMinor={minor}", f"-X {package}.gitTreeState=clean"]
    return tuple(flags)


MODULES = (
    Module(
        "kubernetes",
        packages=("tool",),
        binaries=(
            "etcd",
            "kube-apiserver",
            "kube-scheduler",
            "kube-controller-manager",
            "kubectl",
            "kwok",
            "kueue",
            "jobset",
            "trainer-controller-manager",
        ),
        renames={"server": "etcd"},
        ldflags=_kubernetes_version_flags(),
    ),
    Module(
        "pulumi",
        packages=("tool",),
        binaries=("pulumi",),
        # as Pulumi's packagers stamp it (nixpkgs pulumi ldflags, -X .../go/common/version.Version): `pulumi version`
        # prints it, and plugins compare against it
        ldflags=(f"-X {PULUMI_VERSION_VAR}={required_version('pulumi', 'github.com/pulumi/pulumi/pkg/v3')}",),
    ),
    Module(
        "pulumi-kubernetes",
        packages=("./cmd/pulumi-resource-kubernetes",),
        binaries=("pulumi-resource-kubernetes",),
        ldflags=(f"-X {PROVIDER_VERSION_VAR}={KUBERNETES_PROVIDER_VERSION}",),
    ),
)


def cache_root() -> Path:
    """Where the binaries are kept, outside the repository."""
    configured = os.environ.get("GPU_FLEET_RECEIVERS_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-fleet" / "receivers"


def bin_dir(module: Module) -> Path:
    """The folder of one module's binaries (it exists once they are all built)."""
    return cache_root() / f"{module.name}-{module.key()}" / "bin"


def missing(modules: tuple[str, ...] = ()) -> list[str]:
    """The binaries not built yet for today's go.mod and go.sum (of the ``modules`` named, or of all)."""
    return [
        f"{module.name}: {binary}"
        for module in MODULES
        if not modules or module.name in modules
        for binary in module.binaries
        if not (bin_dir(module) / binary).is_file()
    ]


def path_entries() -> list[Path]:
    """The binaries' folders, for PATH."""
    return [bin_dir(module) for module in MODULES]


def binary(name: str) -> Path:
    """One binary's path, by name (``kube-apiserver``, ``pulumi``, ...)."""
    for module in MODULES:
        if name in module.binaries:
            return bin_dir(module) / name
    raise KeyError(name)


def _go_env(module: Module) -> dict[str, str]:
    env = dict(os.environ)
    env["GOTOOLCHAIN"] = module.toolchain()
    env["GOFLAGS"] = "-mod=readonly -trimpath -buildvcs=false"
    env["CGO_ENABLED"] = "0"
    return env


def _write_provider_schema(module: Module) -> None:
    """Upstream's generate.go, done here: its schema.json with the version set, its mapping, minified."""
    listed = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", PROVIDER_MODULE],
        cwd=module.folder,
        env=_go_env(module),
        check=True,
        capture_output=True,
        text=True,
    )
    source = Path(listed.stdout.strip()) / "cmd" / "pulumi-resource-kubernetes"
    schema = json.loads((source / "schema.json").read_text())
    schema["version"] = KUBERNETES_PROVIDER_VERSION
    (PROVIDER_MAIN / "schema-embed.json").write_text(json.dumps(schema, separators=(",", ":")))
    mapping = json.loads((source / "terraform-mapping.json").read_text())
    (PROVIDER_MAIN / "terraform-mapping-embed.json").write_text(json.dumps(mapping, separators=(",", ":")))


def build(module: Module, log=sys.stderr) -> Path:
    """Build one module's binaries unless they are there; return their folder."""
    target = bin_dir(module)
    if all((target / name).is_file() for name in module.binaries):
        return target
    env = _go_env(module)
    subprocess.run(["go", "mod", "download"], cwd=module.folder, env=env, check=True)
    if module.name == "pulumi-kubernetes":
        _write_provider_schema(module)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    try:
        command = ["go", "build", "-ldflags", " ".join(("-s", "-w", *module.ldflags)), "-o", f"{staging}/"]
        print(f"building {module.name} with {env['GOTOOLCHAIN']} into {target}", file=log, flush=True)
        subprocess.run([*command, *module.packages], cwd=module.folder, env=env, check=True)
        for old, new in module.renames.items():
            (staging / old).rename(staging / new)
        absent = [name for name in module.binaries if not (staging / name).is_file()]
        if absent:
            raise SystemExit(f"{module.name}: go build left no {', '.join(absent)}")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    """``build`` the missing binaries, print their ``path``, or ``check`` that none is missing."""
    parser = argparse.ArgumentParser(prog="python -m tests.real.toolchain", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("build", "path", "check"))
    parser.add_argument("--only", action="append", choices=[module.name for module in MODULES])
    args = parser.parse_args(argv)
    if args.action == "build":
        if shutil.which("go") is None:
            print("go is not on PATH: the real receivers are built with it (https://go.dev/doc/install)")
            return 2
        for module in MODULES:
            if not args.only or module.name in args.only:
                build(module)
        print(os.pathsep.join(str(entry) for entry in path_entries()))
        return 0
    if args.action == "path":
        print(os.pathsep.join(str(entry) for entry in path_entries()))
        return 0
    absent = missing()
    for line in absent:
        print(f"not built: {line}")
    return 1 if absent else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted")
        sys.exit(130)
