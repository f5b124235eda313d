"""The names the infra stack deploys what the doctor reads under: namespaces, Helm releases, Services, PodMonitors
and the label of the fleet's own Jobs."""

from __future__ import annotations

from fleet.model.core import pod_contract

# Where the infra stack puts things (components/kubernetes/namespaces.py: MONITORING_NS, NODE_AGENTS_NS;
# prometheus_stack.py: RELEASE; gpu_agents.py: the Helm release names of the device plugin and dcgm-exporter;
# gateway.py: GATEWAY_NAME). Kept here as data so the doctor does not import the Pulumi components;
# tests/tools/doctor/test_names.py holds them equal.


MONITORING_NS = "monitoring"
NODE_AGENTS_NS = "node-agents"
DEVICE_PLUGIN_NS = "kube-system"
# Release "nvidia-device-plugin" of chart nvidia-device-plugin: its DaemonSet is named by the chart's fullname, which
# is the release name when it contains the chart name, and labelled app.kubernetes.io/instance=<release>
# (NVIDIA/k8s-device-plugin v0.17.1, deployments/helm/nvidia-device-plugin/templates/_helpers.tpl and
# daemonset-device-plugin.yml).
DEVICE_PLUGIN = "nvidia-device-plugin"
# Release "dcgm-exporter" of chart dcgm-exporter: the same naming (NVIDIA/dcgm-exporter 4.2.3-4.1.1,
# deployment/templates/_helpers.tpl and daemonset.yaml).
EXPORTER = "dcgm-exporter"
GATEWAY = "federation-gateway"
# kube-prometheus-stack names its Prometheus Service `<fullname>-prometheus` on port 9090, fullname being
# fullnameOverride (components/kubernetes/prometheus_stack.py sets RELEASE = "kps") (prometheus-community/helm-charts
# kube-prometheus-stack-79.5.0, charts/kube-prometheus-stack/templates/prometheus/service.yaml, _helpers.tpl,
# values.yaml prometheus.service.port).
PROMETHEUS_SERVICE = "kps-prometheus"
PROMETHEUS_PORT = 9090
# The fleet's PodMonitors (namespace, name): the benchmark and probe pods' (components/kubernetes/benchmark.py) and
# the GitLab runners' (components/kubernetes/runners.py), with what serves the metrics in their pods. The operator
# labels every target of a PodMonitor without spec.jobLabel with job="<namespace>/<name>" (prometheus-operator
# v0.86.2, pkg/prometheus/promcfg.go generatePodMonitorConfig: the relabeling with target_label "job" and replacement
# fmt.Sprintf("%s/%s", m.GetNamespace(), m.GetName())).
POD_MONITORS = (
    (pod_contract.BENCHMARK_NAMESPACE, "gpu-fleet-benchmarks"),
    (pod_contract.RUNNER_NAMESPACE, pod_contract.RUNNER_POD_MONITOR),
)
# What must listen in a pod of each PodMonitor, and the container to read the logs of.
MONITOR_SERVERS = {
    "gpu-fleet-benchmarks": (f"mtail on port {pod_contract.METRICS_PORT_NAME} ({pod_contract.METRICS_PORT})", "mtail"),
    pod_contract.RUNNER_POD_MONITOR: ("the runner on port metrics (9252, the chart's metrics.enabled)", ""),
}
FLEET_PARTS = (pod_contract.BENCHMARK_PART_OF,)
PART_OF = "app.kubernetes.io/part-of"
PART_OF_SELECTOR = f"{PART_OF} in ({','.join(FLEET_PARTS)})"
