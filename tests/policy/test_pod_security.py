"""policy/gpufleet_policies/pod_security.py: Pod Security `restricted` and no default API token, for each of
the eight pod-bearing kinds, each rule and each allowed form."""

from __future__ import annotations

import copy

import pytest

from tests.policy.support import (
    CRONJOB,
    DEPLOYMENT,
    DIGEST,
    JOB,
    LEAST_PRIVILEGE,
    NAMESPACE,
    POD_BEARING_KINDS,
    as_kind,
    assert_violation,
    check,
    harden,
    issue_job_spec,
    mandatory,
    only,
    pod,
    pod_spec_of,
    raw_job,
    reg,
)


def test_privileged_container_and_host_path(session, job):
    pod(job)["containers"][0]["securityContext"]["privileged"] = True
    pod(job)["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    assert_violation(
        check(session, job), "pod-security-restricted", "privileged is true", "volume 'host' is of type hostPath"
    )


def test_privileged_cronjob(plans, session):
    r = reg(plans, "fix-aks", CRONJOB, "-a100")
    pod(r)["initContainers"][0]["securityContext"]["privileged"] = True
    assert_violation(check(session, r), "pod-security-restricted", "'prepare-log'")


def test_the_fleets_own_pods_comply(plans, session, gateway):
    for r in (reg(plans, "fix-eks", JOB, "-t4"), reg(plans, "fix-aks", CRONJOB, "-t4"), gateway):
        assert mandatory(check(session, r)) == [], r.name


def test_the_issues_job_is_refused_although_it_requests_no_gpu(session):
    """SYS_ADMIN and NET_ADMIN, privilege escalation, a host port and Unconfined seccomp: a plain Job, no GPU."""
    job = raw_job(issue_job_spec())
    findings = check(session, job)
    assert_violation(
        findings,
        "pod-security-restricted",
        "seccompProfile is Unconfined",
        "allowPrivilegeEscalation must be false",
        "capabilities.add ['NET_ADMIN', 'SYS_ADMIN']",
        "hostPort 8080",
        "capabilities.drop must contain ALL",
        "runAsNonRoot must be true",
    )
    assert_violation(findings, "pod-service-account-token", "automountServiceAccountToken: false")
    assert_violation_advisory = [f for f in findings if f.policy == "images-by-digest"]
    assert assert_violation_advisory and all(f.level == "advisory" for f in assert_violation_advisory)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda p: p.update(hostNetwork=True), "hostNetwork is true"),
        (lambda p: p.update(hostPID=True), "hostPID is true"),
        (lambda p: p["containers"][0]["securityContext"].update(runAsUser=0), "runAsUser is 0"),
        (lambda p: p["securityContext"].update(runAsNonRoot=False), "runAsNonRoot must be true"),
        (lambda p: p["initContainers"][1]["securityContext"].pop("capabilities"), "drop must contain ALL"),
        (lambda p: p["initContainers"][0]["securityContext"].pop("allowPrivilegeEscalation"), "must be false"),
        (lambda p: p["securityContext"].pop("seccompProfile"), "seccompProfile.type is unset"),
        (lambda p: p["volumes"].append({"name": "sock", "hostPath": {"path": "/run"}}), "type hostPath"),
    ],
)
def test_each_restricted_rule_on_a_benchmark_job(plans, session, change, fragment):
    job = reg(plans, "fix-eks", JOB, "-t4")
    change(pod(job))
    assert_violation(check(session, job), "pod-security-restricted", fragment)


def test_a_deployment_is_checked_too(session, gateway):
    spec = gateway.inputs["spec"]["template"]["spec"]
    spec["containers"][0]["securityContext"]["capabilities"] = {"add": ["NET_RAW"]}
    spec["automountServiceAccountToken"] = True
    findings = check(session, gateway)
    assert_violation(findings, "pod-security-restricted", "container 'nginx'", "NET_RAW")
    assert_violation(findings, "pod-service-account-token", "default service account")


def test_a_pod_with_its_own_service_account_may_mount_its_token(plans, session):
    job = reg(plans, "fix-eks", JOB, "-t4")
    pod(job)["automountServiceAccountToken"] = True
    assert only(check(session, job), "pod-service-account-token")
    pod(job)["serviceAccountName"] = "benchmark-reader"
    assert not only(check(session, job), "pod-service-account-token")


def test_root_only_for_a_workload_that_needs_it_and_only_in_its_namespace(plans, session):
    """The fixture uploader declares needs_root: as root it passes in benchmarks-root and fails anywhere else; a
    workload that does not declare it may not run as root even there."""
    job = reg(plans, "fix-eks", JOB, "-t4")
    as_root = copy.deepcopy(job)
    pod(as_root)["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}}
    as_root.inputs["metadata"]["namespace"] = "benchmarks-root"
    assert_violation(check(session, as_root), "pod-security-restricted", "runAsNonRoot must be true")  # tracker
    labels = as_root.inputs["spec"]["template"]["metadata"]["labels"]
    labels["workload"] = "uploader"
    assert not only(check(session, as_root), "pod-security-restricted")
    as_root.inputs["metadata"]["namespace"] = "benchmarks"
    assert_violation(check(session, as_root), "pod-security-restricted", "belongs in 'benchmarks-root'")


def test_the_fixture_fleets_own_resources_pass_the_least_privilege_policies(plans, session):
    """The unmodified plan of the fixture fleet, every stack whole: none of its pods, namespaces or network policies
    breaks a policy of issue #15, and there are pods and namespaces of several kinds for them to check."""
    kinds = set()
    for stack, plan in plans.items():
        regs = list(plan.registrations)
        kinds |= {r.type for r in regs if r.type in POD_BEARING_KINDS}
        assert any(r.type == NAMESPACE for r in regs), stack
        findings = session.analyze_registrations(regs)
        assert [(f.policy, f.message) for f in findings if f.policy in LEAST_PRIVILEGE] == [], stack
    assert {JOB, CRONJOB, DEPLOYMENT} <= kinds


@pytest.mark.parametrize("type_", POD_BEARING_KINDS)
def test_every_pod_bearing_kind_is_checked(session, gateway, type_):
    r = as_kind(gateway, type_)
    findings = check(session, r)
    assert mandatory(findings) == [], [(f.policy, f.message) for f in findings]
    kind = type_.rsplit(":", 1)[-1]
    pod_spec_of(r)["containers"][0]["securityContext"]["privileged"] = True
    pod_spec_of(r)["automountServiceAccountToken"] = True
    findings = check(session, r)
    assert_violation(
        findings, "pod-security-restricted", f"{kind} '{r.name}'", "container 'nginx'", "privileged is true", urn=r.urn
    )
    assert_violation(findings, "pod-service-account-token", f"{kind} '{r.name}'", "automountServiceAccountToken")
    digests = only(findings, "images-by-digest")
    assert digests and {f.level for f in digests} == {"advisory"} and "container 'nginx'" in digests[0].message


def test_the_issues_job_made_compliant_passes(session):
    spec = harden(issue_job_spec())
    spec["containers"][0]["ports"] = [{"containerPort": 8080}]
    spec["containers"][0]["image"] += DIGEST
    assert check(session, raw_job(spec)) == []


def test_the_issues_job_names_resource_container_and_field(session):
    findings = only(check(session, raw_job(issue_job_spec())), "pod-security-restricted")
    assert findings and all("Job 'debug': " in f.message for f in findings), [f.message for f in findings]
    container = [f.message for f in findings if "container 'tool'" in f.message]
    assert any("allowPrivilegeEscalation" in m and "set it" in m for m in container)
    assert any("capabilities.drop" in m and "[ALL]" in m for m in container)
    assert any("hostPort 8080" in m and "remove hostPort" in m for m in container)
    assert any("pod securityContext.seccompProfile is Unconfined" in f.message for f in findings)


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (lambda p: p.update(hostIPC=True), ("hostIPC is true",)),
        (lambda p: p.update(hostNetwork=True), ("hostNetwork is true",)),
        (lambda p: p.update(hostPID=True), ("hostPID is true",)),
        (lambda p: p["containers"][0]["securityContext"].update(privileged=True), ("privileged is true",)),
        (
            lambda p: p["containers"][0]["securityContext"].update(allowPrivilegeEscalation=True),
            ("container 'nginx'", "allowPrivilegeEscalation must be false"),
        ),
        (
            lambda p: p["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
            ("unset counts as true",),
        ),
        (
            lambda p: p["containers"][0]["securityContext"]["capabilities"].update(drop=["NET_RAW"]),
            ("capabilities.drop must contain ALL",),
        ),
        (
            lambda p: p["containers"][0]["securityContext"]["capabilities"].update(
                add=["NET_BIND_SERVICE", "SYS_TIME"]
            ),
            ("capabilities.add ['SYS_TIME']", "only NET_BIND_SERVICE"),
        ),
        (  # the container's own Unconfined wins over the pod's RuntimeDefault
            lambda p: p["containers"][0]["securityContext"].update(seccompProfile={"type": "Unconfined"}),
            ("container 'nginx'", "securityContext.seccompProfile.type is Unconfined"),
        ),
        (
            lambda p: p["securityContext"].update(seccompProfile={"type": "Unconfined"}),
            ("pod securityContext.seccompProfile is Unconfined",),
        ),
        (
            lambda p: [
                p["securityContext"].pop("seccompProfile"),
                p["containers"][0]["securityContext"].pop("seccompProfile"),
            ],
            ("seccompProfile.type is unset",),
        ),
        (  # a container's false overrides the pod's true
            lambda p: p["containers"][0]["securityContext"].update(runAsNonRoot=False),
            ("container 'nginx'", "securityContext.runAsNonRoot is false"),
        ),
        (
            lambda p: [
                p["securityContext"].pop("runAsNonRoot"),
                p["containers"][0]["securityContext"].pop("runAsNonRoot"),
            ],
            ("runAsNonRoot must be true",),
        ),
        (lambda p: p["securityContext"].update(runAsUser=0), ("pod securityContext.runAsUser is 0",)),
        (
            lambda p: p["containers"][0]["securityContext"].update(runAsUser=0),
            ("container 'nginx'", "securityContext.runAsUser is 0"),
        ),
        (
            lambda p: p["containers"][0]["ports"].append({"containerPort": 80, "hostPort": 80}),
            ("hostPort 80",),
        ),
        (
            lambda p: p["volumes"].append({"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}),
            ("volume 'docker' is of type hostPath",),
        ),
        (
            lambda p: p["volumes"].append({"name": "share", "nfs": {"server": "nas", "path": "/"}}),
            ("volume 'share' is of type nfs",),
        ),
        (  # an ephemeral (debug) container is a container too
            lambda p: p.update(ephemeralContainers=[{"name": "debugger", "image": "busybox:1.36"}]),
            ("container 'debugger'", "allowPrivilegeEscalation", "capabilities.drop"),
        ),
        (  # and so is an init container
            lambda p: p.update(initContainers=[{"name": "setup", "image": "busybox:1.36", "securityContext": {}}]),
            ("container 'setup'", "allowPrivilegeEscalation"),
        ),
    ],
)
def test_each_restricted_rule_on_a_deployment(session, gateway, change, fragments):
    r = as_kind(gateway, DEPLOYMENT)
    change(pod_spec_of(r))
    assert_violation(check(session, r), "pod-security-restricted", f"Deployment '{r.name}'", *fragments)


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["NET_BIND_SERVICE"]),
        lambda p: p["securityContext"].update(seccompProfile={"type": "Localhost", "localhostProfile": "fleet.json"}),
        # seccomp and non-root set on the container alone, or on the pod alone
        lambda p: [p["securityContext"].pop("seccompProfile"), p["securityContext"].pop("runAsNonRoot")],
        lambda p: [p["containers"][0]["securityContext"].pop(k) for k in ("seccompProfile", "runAsNonRoot")],
        lambda p: p["volumes"].extend(
            [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "info", "downwardAPI": {"items": []}},
                {"name": "token", "projected": {"sources": []}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "csi", "csi": {"driver": "secrets-store.csi.k8s.io"}},
            ]
        ),
        lambda p: p.update(hostNetwork=False, hostPID=False, hostIPC=False),
        lambda p: p.update(automountServiceAccountToken=None, serviceAccountName="gateway-reader"),
    ],
)
def test_what_restricted_allows(session, gateway, change):
    r = as_kind(gateway, DEPLOYMENT)
    change(pod_spec_of(r))
    assert mandatory(check(session, r)) == []


def test_service_account_token_of_the_default_account(session, gateway):
    r = as_kind(gateway, DEPLOYMENT)
    del pod_spec_of(r)["automountServiceAccountToken"]  # unset mounts the token
    assert_violation(check(session, r), "pod-service-account-token", "default service account")
    pod_spec_of(r)["serviceAccountName"] = "default"  # naming the default account is no exception
    assert_violation(check(session, r), "pod-service-account-token", "automountServiceAccountToken: false")
    pod_spec_of(r)["serviceAccountName"] = "federation-reader"
    assert not only(check(session, r), "pod-service-account-token")


def test_root_benchmarks_keep_every_other_rule(plans, session):
    """A needs_root benchmark may run as root in benchmarks-root, but privilege, escalation, capabilities, seccomp and
    host access are still refused; a non-root benchmark may run in benchmarks-root too."""
    job = reg(plans, "fix-eks", JOB, "-t4")
    job.inputs["metadata"]["namespace"] = "benchmarks-root"
    assert not only(check(session, job), "pod-security-restricted")  # non-root in benchmarks-root: fine
    job.inputs["spec"]["template"]["metadata"]["labels"]["workload"] = "uploader"
    pod(job)["securityContext"] = {"runAsUser": 0, "runAsNonRoot": False, "seccompProfile": {"type": "RuntimeDefault"}}
    for c in pod(job)["containers"]:
        c["securityContext"].pop("runAsNonRoot", None)
        c["securityContext"].pop("runAsUser", None)
    assert not only(check(session, job), "pod-security-restricted")  # root, allowed
    c = pod(job)["containers"][0]
    c["securityContext"].update(privileged=True, allowPrivilegeEscalation=True)
    c["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN"]
    pod(job)["hostPID"] = True
    findings = only(check(session, job), "pod-security-restricted")
    text = "\n".join(f.message for f in findings)
    for fragment in ("privileged is true", "allowPrivilegeEscalation", "['SYS_ADMIN']", "hostPID"):
        assert fragment in text
    assert "runAsNonRoot" not in text and "runAsUser" not in text


# --- the Pod Security Standards' baseline controls (pod-security-admission policy/check_*.go) ----------------------

SAFE_POD = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "app",
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
    ],
}


def _with(path: str, value) -> dict:
    spec = copy.deepcopy(SAFE_POD)
    node = spec
    *parents, last = path.split(".")
    for key in parents:
        node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
    node[last] = value
    return spec


@pytest.mark.parametrize(
    ("path", "value", "found"),
    [
        ("securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}], "'kernel.msgmax' is not a safe sysctl"),
        ("containers.0.securityContext.procMount", "Unmasked", "procMount is Unmasked"),
        ("securityContext.seLinuxOptions", {"type": "spc_t"}, "seLinuxOptions.type 'spc_t'"),
        ("containers.0.securityContext.seLinuxOptions", {"user": "system_u"}, "sets user or role"),
        ("containers.0.securityContext.appArmorProfile", {"type": "Unconfined"}, "appArmorProfile.type is Unconfined"),
        ("containers.0.securityContext.windowsOptions", {"hostProcess": True}, "hostProcess is true"),
        ("containers.0.livenessProbe", {"httpGet": {"host": "10.0.0.1", "port": 80}}, "httpGet.host is set"),
    ],
)
def test_baselines_own_controls_hold_at_both_levels(path, value, found):
    from policy.gpufleet_policies.pod_security import baseline_problems, restricted_problems

    assert baseline_problems(SAFE_POD) == restricted_problems(SAFE_POD) == []
    spec = _with(path, value)
    assert any(found in p for p in baseline_problems(spec)), baseline_problems(spec)
    assert any(found in p for p in restricted_problems(spec)), restricted_problems(spec)


def test_an_unconfined_apparmor_annotation_is_found_on_the_pods_metadata():
    from policy.gpufleet_policies.pod_security import baseline_problems

    metadata = {"annotations": {"container.apparmor.security.beta.kubernetes.io/app": "unconfined"}}
    assert baseline_problems(SAFE_POD, metadata) == [
        "annotation container.apparmor.security.beta.kubernetes.io/app: unconfined: use runtime/default "
        "(or localhost/<profile>)"
    ]
    fine = {"annotations": {"container.apparmor.security.beta.kubernetes.io/app": "localhost/k8s-app"}}
    assert baseline_problems(SAFE_POD, fine) == []


def test_baseline_allows_what_only_restricted_forbids():
    """Root, an unset seccomp profile, capabilities of baseline's set, a missing drop ALL: baseline admits them
    (a needs_root workload's namespace is baseline); privileged, host namespaces, hostPath and hostPort it refuses."""
    from policy.gpufleet_policies.pod_security import baseline_problems, restricted_problems

    root = {"containers": [{"name": "app", "securityContext": {"runAsUser": 0, "capabilities": {"add": ["CHOWN"]}}}]}
    assert baseline_problems(root) == [] and restricted_problems(root) != []
    bad = {
        "hostNetwork": True,
        "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
        "containers": [
            {
                "name": "app",
                "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}},
                "ports": [{"containerPort": 80, "hostPort": 80}],
            }
        ],
    }
    found = "\n".join(baseline_problems(bad))
    for word in ("hostNetwork", "hostPath", "privileged", "SYS_ADMIN", "hostPort"):
        assert word in found
