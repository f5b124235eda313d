"""Pod Security ``restricted`` for every pod-bearing resource, GPU or not, and no default API token in any pod.

The controls are the Pod Security Standards' (kubernetes.io/docs/concepts/security/pod-security-standards), as
kubernetes/kubernetes ``staging/src/k8s.io/pod-security-admission/policy/check_*.go`` enforce them: ``baseline``
(:func:`baseline_problems`) and ``restricted`` (:func:`restricted_problems`, which includes baseline's). The chart
tier (tests/tools/test_charts.py) holds every rendered chart pod to its namespace's level with them.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from fleet.model.core import pod_contract

from .registry import resource_policy
from .resources import all_containers, fleet, plain, pod_of, subject

# Pod Security Standards, `restricted` (kubernetes.io/docs/concepts/security/pod-security-standards): the volume
# types it allows, the one capability a container may add, the seccomp profiles it accepts.
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
ALLOWED_CAPABILITY = "NET_BIND_SERVICE"
SECCOMP_OK = {"RuntimeDefault", "Localhost"}
# baseline (check_capabilities_baseline.go): the capabilities a container may add
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP",
    "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
# baseline (check_sysctls.go sysctlsAllowedV1Dot29, what every supported Kubernetes version allows; later versions
# only add to it)
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip
# baseline (check_seLinuxOptions.go): the SELinux types a pod may ask for; user and role must stay unset
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
# baseline (check_appArmorProfile.go): the AppArmor annotation's values a pod may use (localhost/<profile> too)
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
LEVEL_LABEL = f"{pod_contract.POD_SECURITY_LABEL_PREFIX}/enforce"


def _root_allowed(args: ResourceValidationArgs, labels: dict[str, Any]) -> bool:
    """Whether this is a benchmark of a workload that declares it needs root (``needs_root``)."""
    if labels.get("app.kubernetes.io/part-of") != pod_contract.BENCHMARK_PART_OF:
        return False
    workload = fleet().workloads.get(str(labels.get("workload", "")))
    return bool(workload and workload.spec.needs_root)


def _container_problems(c: dict[str, Any], pod_ctx: dict[str, Any], may_run_as_root: bool) -> list[str]:
    """What keeps one container from the `restricted` level, each as `field: what to set`."""
    ctx = c.get("securityContext") or {}
    problems = []
    if ctx.get("privileged"):
        problems.append("securityContext.privileged is true: remove it (or set it false)")
    if ctx.get("allowPrivilegeEscalation") is not False:
        problems.append(
            "securityContext.allowPrivilegeEscalation must be false: set it explicitly (unset counts as true)"
        )
    caps = ctx.get("capabilities") or {}
    if "ALL" not in (caps.get("drop") or []):
        problems.append("securityContext.capabilities.drop must contain ALL: set capabilities.drop: [ALL]")
    added = sorted(set(caps.get("add") or []) - {ALLOWED_CAPABILITY})
    if added:
        problems.append(
            f"securityContext.capabilities.add {added}: only {ALLOWED_CAPABILITY} may be added; remove the others"
        )
    own_seccomp = (ctx.get("seccompProfile") or {}).get("type")
    if own_seccomp and own_seccomp not in SECCOMP_OK:
        problems.append(f"securityContext.seccompProfile.type is {own_seccomp}: set RuntimeDefault (or Localhost)")
    elif not own_seccomp and not (pod_ctx.get("seccompProfile") or {}).get("type"):
        problems.append(
            "seccompProfile.type is unset: set seccompProfile.type: RuntimeDefault in the pod's or the container's "
            "securityContext"
        )
    if not may_run_as_root:
        if ctx.get("runAsNonRoot") is False:
            problems.append("securityContext.runAsNonRoot is false: runAsNonRoot must be true, set it true")
        elif ctx.get("runAsNonRoot") is None and pod_ctx.get("runAsNonRoot") is None:
            problems.append(
                "runAsNonRoot must be true: set runAsNonRoot: true in the pod's or the container's securityContext"
            )
        if ctx.get("runAsUser") == 0:
            problems.append("securityContext.runAsUser is 0 (root): set a non-root uid (the workload's run_as_user)")
    for port in c.get("ports") or []:
        if port.get("hostPort"):
            problems.append(
                f"ports: port {port.get('containerPort')} has hostPort {port['hostPort']}: remove hostPort "
                "(reach the pod through a Service)"
            )
    return problems


def _pod_problems(pod: dict[str, Any], may_run_as_root: bool) -> list[str]:
    """What keeps the pod spec itself (not its containers) from the `restricted` level."""
    ctx = pod.get("securityContext") or {}
    problems = []
    seccomp = (ctx.get("seccompProfile") or {}).get("type")
    if seccomp and seccomp not in SECCOMP_OK:
        problems.append(f"pod securityContext.seccompProfile is {seccomp}: set type RuntimeDefault (or Localhost)")
    if not may_run_as_root:
        if ctx.get("runAsNonRoot") is False:
            problems.append("pod securityContext.runAsNonRoot is false: runAsNonRoot must be true, set it true")
        if ctx.get("runAsUser") == 0:
            problems.append(
                "pod securityContext.runAsUser is 0 (root): set a non-root uid (the workload's run_as_user)"
            )
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            problems.append(f"{key} is true: remove it (or set it false), the pod must not share the node's namespaces")
    for volume in pod.get("volumes") or []:
        kinds = sorted(set(volume) - {"name"})
        if kinds and not set(kinds) <= RESTRICTED_VOLUMES:
            problems.append(
                f"volume {volume.get('name')!r} is of type {', '.join(kinds)}: use one of "
                f"{', '.join(sorted(RESTRICTED_VOLUMES))} (hostPath reaches the node's files)"
            )
    return problems


def _baseline_only_problems(pod: dict[str, Any], metadata: dict[str, Any] | None) -> list[str]:
    """baseline's controls that restricted's own checks above do not already cover (restricted includes baseline):
    HostProcess, SELinux, /proc mount type, sysctls, AppArmor, host probes."""
    problems = []
    pod_ctx = pod.get("securityContext") or {}
    contexts = [("pod securityContext", pod_ctx)] + [
        (f"container {c.get('name')!r}: securityContext", c.get("securityContext") or {}) for c in all_containers(pod)
    ]
    for where, ctx in contexts:
        if (ctx.get("windowsOptions") or {}).get("hostProcess"):
            problems.append(f"{where}.windowsOptions.hostProcess is true: remove it")
        selinux = ctx.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in SELINUX_TYPES:
            problems.append(
                f"{where}.seLinuxOptions.type {selinux['type']!r}: use one of container_t, container_init_t"
            )
        if selinux.get("user") or selinux.get("role"):
            problems.append(f"{where}.seLinuxOptions sets user or role: remove them")
        if ctx.get("procMount") not in (None, "Default"):
            problems.append(f"{where}.procMount is {ctx['procMount']}: remove it (or set Default)")
        if (ctx.get("appArmorProfile") or {}).get("type") == "Unconfined":
            problems.append(f"{where}.appArmorProfile.type is Unconfined: set RuntimeDefault (or Localhost)")
    for sysctl in pod_ctx.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            problems.append(f"pod securityContext.sysctls {sysctl.get('name')!r} is not a safe sysctl: remove it")
    for key, value in ((metadata or {}).get("annotations") or {}).items():
        if key.startswith(APPARMOR_ANNOTATION) and value != "runtime/default" and not value.startswith("localhost/"):
            problems.append(f"annotation {key}: {value}: use runtime/default (or localhost/<profile>)")
    for c in all_containers(pod):
        for handler in (c.get("livenessProbe"), c.get("readinessProbe"), c.get("startupProbe"),
                        *((c.get("lifecycle") or {}).values())):  # fmt: skip
            for action in ("httpGet", "tcpSocket"):
                if ((handler or {}).get(action) or {}).get("host"):
                    problems.append(f"container {c.get('name')!r}: a probe or hook's {action}.host is set: remove it")
    return problems


def baseline_problems(pod: dict[str, Any], metadata: dict[str, Any] | None = None) -> list[str]:
    """What keeps a pod spec (and its pod ``metadata``: AppArmor annotations) from Pod Security `baseline`; [] when it
    meets the level."""
    problems = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            problems.append(f"{key} is true: remove it (or set it false), the pod must not share the node's namespaces")
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            problems.append(f"volume {volume.get('name')!r} is a hostPath: it reaches the node's files")
    if (pod.get("securityContext") or {}).get("seccompProfile", {}).get("type") == "Unconfined":
        problems.append("pod securityContext.seccompProfile.type is Unconfined: set RuntimeDefault")
    for c in all_containers(pod):
        ctx = c.get("securityContext") or {}
        name = f"container {c.get('name')!r}"
        if ctx.get("privileged"):
            problems.append(f"{name}: securityContext.privileged is true: remove it (or set it false)")
        added = sorted(set((ctx.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES)
        if added:
            problems.append(f"{name}: securityContext.capabilities.add {added}: beyond baseline's set; remove them")
        if (ctx.get("seccompProfile") or {}).get("type") == "Unconfined":
            problems.append(f"{name}: securityContext.seccompProfile.type is Unconfined: set RuntimeDefault")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                problems.append(f"{name}: ports: port {port.get('containerPort')} has hostPort {port['hostPort']}")
    return problems + _baseline_only_problems(pod, metadata)


def restricted_problems(
    pod: dict[str, Any], may_run_as_root: bool = False, metadata: dict[str, Any] | None = None
) -> list[str]:
    """What keeps a pod spec (``PodSpec``, and its pod ``metadata``) from Pod Security `restricted`, the pod's own
    fields, then each container's (``container 'name': ...``), then baseline's remaining controls; [] when it meets
    the level. Also what the chart tests check rendered charts with."""
    problems = _pod_problems(pod, may_run_as_root)
    for c in all_containers(pod):
        for problem in _container_problems(c, pod.get("securityContext") or {}, may_run_as_root):
            problems.append(f"container {c.get('name')!r}: {problem}")
    return problems + _baseline_only_problems(pod, metadata)


@resource_policy(
    "pod-security-restricted",
    "Every pod (Pod, Job, CronJob, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController), GPU or "
    "not, meets Pod Security `restricted`: not privileged, allowPrivilegeEscalation false, capabilities.drop ALL "
    "(only NET_BIND_SERVICE added), RuntimeDefault or Localhost seccomp, non-root (root only for a benchmark whose "
    "workload declares needs_root, and then in benchmarks-root), no host namespaces, host ports or hostPath.",
)
def _validate_pod_security(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = pod_of(args)
    if not found:
        return
    metadata, pod = found
    labels = metadata.get("labels") or {}
    namespace = ((plain(args.props).get("metadata") or {}).get("namespace")) or "default"
    may_run_as_root = _root_allowed(args, labels)
    if may_run_as_root and namespace != pod_contract.ROOT_BENCHMARK_NAMESPACE:
        report(
            f"{subject(args)}: runs the root-needing workload {labels.get('workload')!r} (needs_root) in namespace "
            f"{namespace!r}: it belongs in {pod_contract.ROOT_BENCHMARK_NAMESPACE!r}, the one namespace that admits "
            f"root (baseline); set metadata.namespace: {pod_contract.ROOT_BENCHMARK_NAMESPACE}"
        )
    for problem in restricted_problems(pod, may_run_as_root, metadata):
        report(f"{subject(args)}: {problem}")


@resource_policy(
    "pod-service-account-token",
    "Every pod sets automountServiceAccountToken: false, unless it runs under a service account of its own "
    "(serviceAccountName other than default), which it has because it needs the Kubernetes API.",
)
def _validate_service_account_token(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = pod_of(args)
    if not found:
        return
    _, pod = found
    account = pod.get("serviceAccountName") or "default"
    if account == "default" and pod.get("automountServiceAccountToken") is not False:
        report(
            f"{subject(args)}: the pod mounts the default service account's API token: set "
            "automountServiceAccountToken: false (a pod that needs the API gets a service account of its own)"
        )
