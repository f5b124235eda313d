"""The ``kubectl auth can-i`` table (``can_i.yaml``): what the queue manager's identity on a worker and the preview
identity may and may not do, asked of rendered RBAC (``fleet.model.access.rbac``) by the tests and the pack, and of a
real API server with the commands ``python -m fleet.model.access.can_i`` prints."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from fleet.model.access.rbac import Request, User
from fleet.model.core.errors import InputError
from fleet.model.core.yaml_source import read_yaml

TABLE = Path(__file__).with_name("can_i.yaml")
FIELDS = ("as", "verb", "resource", "group", "namespace", "allowed")
SERVICE_ACCOUNT = "system:serviceaccount:"


@dataclass(frozen=True)
class Question:
    """One row: whether ``user`` may make ``request``, and the expected answer."""

    user: str
    request: Request
    allowed: bool

    def who(self) -> User:
        """The user as the authorizer sees it (a service account with its groups)."""
        if self.user.startswith(SERVICE_ACCOUNT):
            namespace, name = self.user[len(SERVICE_ACCOUNT) :].split(":", 1)
            return User.service_account(namespace, name)
        return User(self.user)

    def kubectl(self) -> list[str]:
        """The ``kubectl auth can-i`` command asking it of a cluster (it answers ``yes`` or ``no``)."""
        resource, _, sub = self.request.resource.partition("/")
        what = f"{resource}.{self.request.api_group}" if self.request.api_group else resource
        command = ["kubectl", "auth", "can-i", "--as", self.user, self.request.verb, what]
        if sub:
            command.append(f"--subresource={sub}")
        command += ["-n", self.request.namespace] if self.request.namespace else ["--all-namespaces"]
        return command


def load(path: Path = TABLE) -> list[Question]:
    """The table's rows; a row missing a field or with a wrong type is an ``InputError`` located in the file."""
    doc = read_yaml(path)
    rows = doc.data if isinstance(doc.data, list) else None
    if rows is None:
        raise InputError([doc.problem((), "must be a list of {as, verb, resource, group, namespace, allowed}")])
    problems, out = [], []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != set(FIELDS):
            problems.append(doc.problem((i,), f"must have exactly the keys {', '.join(FIELDS)}"))
            continue
        if not isinstance(row["allowed"], bool):
            problems.append(doc.problem((i, "allowed"), "must be true or false"))
            continue
        if not all(isinstance(row[k], str) for k in FIELDS[:-1]) or not row["as"] or not row["verb"]:
            problems.append(doc.problem((i,), "as, verb, resource, group and namespace must be strings"))
            continue
        request = Request(row["verb"], row["resource"], row["group"], namespace=row["namespace"])
        out.append(Question(row["as"], request, row["allowed"]))
    if problems:
        raise InputError(problems)
    return out


def main() -> int:
    """Print each row's kubectl command and the answer it must give."""
    for q in load():
        print(f"{shlex.join(q.kubectl())}  # {'yes' if q.allowed else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
