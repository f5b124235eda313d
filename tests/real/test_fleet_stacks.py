"""Every stack of the shipped fleet under the real Pulumi CLI and Kubernetes provider, on hollow control planes
(tests/real/fleet_tier.py): a preview with the policy pack, run by the CLI's own analyzer host."""

from __future__ import annotations

import pytest
from pulumi import automation as auto

from components.kubernetes.multikueue import TOKEN_MAX_DAYS, TOKEN_SETTING
from fleet.model.access import can_i
from fleet.model.core.pod_contract import KUEUE_NAMESPACE
from fleet.model.loader import load_fleet
from fleet.model.queues.settings import WORKER_ACCOUNT
from tests.e2e.processes import patience, wait_for
from tests.real.agreement import disagreements
from tests.real.conftest import require_receivers
from tests.real.fleet_tier import FleetTier, stack_order

FLEET = load_fleet()
ORDER = stack_order(FLEET)


@pytest.fixture(scope="module")
def tier(tmp_path_factory):
    """The shipped fleet's stacks on their hollow clusters; every process stopped at the end."""
    require_receivers()
    fleet_tier = FleetTier(FLEET, tmp_path_factory.mktemp("tier"))
    try:
        yield fleet_tier
    finally:
        fleet_tier.stop()


def mandatory_violations(events: list) -> list[str]:
    """The mandatory policy violations among the engine's events, in words."""
    return [
        f"{e.policy_event.policy_name} on {e.policy_event.resource_urn}: {e.policy_event.message}"
        for e in events
        if e.policy_event is not None and e.policy_event.enforcement_level == "mandatory"
    ]


def cannot_run(events: list) -> list[str]:
    """The policies the pack could not run (a value the preview cannot know read), in words."""
    return [
        f"{e.policy_event.policy_name}: {e.policy_event.message}"
        for e in events
        if e.policy_event is not None and "can't run policy" in e.policy_event.message
    ]


@pytest.mark.parametrize("name", ORDER)
def test_the_real_preview_with_the_policy_pack_passes_then_up_succeeds(tier, name):
    """In the fleet's order (a central reads its leaves' outputs, the manager its workers'): a preview with the pack,
    then ``pulumi up`` (the API server accepts every object), and for a queue worker the token the manager needs,
    as docs/queues.md has the operator make it after the first deploy, then another ``up``."""
    on = tier.on_hollow(name)
    preview(on)
    up(on)
    if FLEET.dispatch and FLEET.dispatch.role(name) == "worker":
        token = on.hollow.kubectl(
            "create", "token", WORKER_ACCOUNT, "-n", KUEUE_NAMESPACE, "--duration", f"{TOKEN_MAX_DAYS * 24}h"
        ).stdout.strip()
        on.stack.set_config(TOKEN_SETTING, auto.ConfigValue(token, secret=True))
        up(on)


def preview(on) -> None:
    """A preview with the policy pack: no mandatory violation, every policy able to run."""
    output: list[str] = []
    events: list = []
    result = on.stack.preview(
        policy_packs=[str(on.engine.policy_pack)], on_output=output.append, on_event=events.append, color="never"
    )
    assert mandatory_violations(events) == [], "".join(output)[-20000:]
    assert cannot_run(events) == []
    assert result.change_summary.get("create", 0) > 0, "".join(output)[-20000:]


def up(on) -> None:
    """``pulumi up`` with the pack; a failure shows the CLI's output and the ends of the control plane's logs."""
    output: list[str] = []
    try:
        result = on.stack.up(policy_packs=[str(on.engine.policy_pack)], on_output=output.append, color="never")
    except Exception as exc:  # the CLI's own account of what failed, and the control plane's logs
        logs = on.hollow.logs()[-8000:]
        pytest.fail(f"pulumi up of {on.cluster.name} failed: {exc}\n{''.join(output)[-20000:]}\n{logs}")
    assert result.summary.result == "succeeded"
    assert on.controllers.problems == []


@pytest.mark.parametrize("name", ORDER)
def test_the_scheduler_and_the_model_agree_on_every_pod(tier, name):
    on = tier.on_hollow(name)

    def settled() -> list[dict]:
        """Every pod once each was bound or tried by the scheduler (None before)."""
        pods = on.hollow.get("pods", "--all-namespaces")["items"]
        tried = all(p["spec"].get("nodeName") or p.get("status", {}).get("conditions") for p in pods)
        return pods if tried else None

    pods = wait_for(f"the scheduler to try every pod of {name}", settled, patience(), on.hollow.processes)
    found = disagreements(on.cluster, pods, on.hollow.get("nodes")["items"])
    assert found == [], "\n".join(found)


WORKERS = [n for n in ORDER if FLEET.dispatch and FLEET.dispatch.role(n) == "worker"]
WORKER_USER = f"system:serviceaccount:{KUEUE_NAMESPACE}:{WORKER_ACCOUNT}"


@pytest.mark.parametrize("name", WORKERS)
def test_the_queue_managers_identity_on_a_worker_has_exactly_what_the_table_says(tier, name):
    """fleet/model/access/can_i.yaml asked of the worker's real API server with `kubectl auth can-i --as`, as
    docs/security.md promises: Jobs and Workloads in the benchmarks namespace, list and watch elsewhere, no Secret, no
    pod."""
    on = tier.on_hollow(name)
    wrong = []
    for question in (q for q in can_i.load() if q.user == WORKER_USER):
        asked = on.hollow.kubectl(*question.kubectl()[1:], check=False)
        answer = asked.stdout.strip()
        if answer not in ("yes", "no") or (answer == "yes") != question.allowed:
            wrong.append(f"{' '.join(question.kubectl())}: {answer or asked.stderr.strip()}, not {question.allowed}")
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize("name", ORDER)
def test_a_second_preview_shows_no_change(tier, name):
    on = tier.on_hollow(name)
    output: list[str] = []
    result = on.stack.preview(on_output=output.append, color="never", diff=True)
    changes = {op: n for op, n in result.change_summary.items() if op != "same" and n}
    assert changes == {}, "".join(output)[-20000:]


@pytest.mark.parametrize("name", list(reversed(ORDER)))
def test_destroy_leaves_nothing_of_the_fleet_behind(tier, name):
    on = tier.on_hollow(name)
    output: list[str] = []
    on.stack.destroy(on_output=output.append, color="never")
    left = on.hollow.kubectl("get", "namespaces", "-l", "app.kubernetes.io/part-of=gpu-fleet", "-o", "name").stdout
    assert left.strip() == "", left
