#!/bin/sh
# gpu-fleet pool probe (fleet/model/probe): check the accelerator this pod was given and print one result line,
#   gpufleet probe card=<card> accelerator=<resource> scheduled=<unix s|unknown> started=<unix s> success=<1|0>
# which the mtail sidecar (mtail/probe.mtail) turns into the gpufleet_probe_* metrics. Exit 0 on success, 1 else.
#
# The pod's creation time is not in the downward API (kubernetes/api core/v1 EnvVarSource), so the probe reads its
# CronJob's scheduled time from its Job's name: the CronJob controller names each Job
# <cronjob>-<scheduled time in minutes since the epoch> (kubernetes/kubernetes pkg/controller/cronjob/
# cronjob_controllerv2.go getJobName, utils.go getTimeHashInMinutes), and the API server labels a Job's pod template
# batch.kubernetes.io/job-name (pkg/registry/batch/job/strategy.go; Kubernetes 1.27+), which reaches the probe as
# BENCHMARK_JOB_NAME through the downward API. A Job started by hand has no such time.
# A Job made by hand may end in digits too (kubectl create job --from=cronjob/... probe-manual-1): a time that is
# not within the day before the pod started is no scheduled time.
started=$(date +%s)
minute=${BENCHMARK_JOB_NAME##*-}
scheduled=unknown
case "$minute" in
  '' | *[!0-9]*) ;;
  *)
    candidate=$(($(expr "$minute" + 0) * 60)) # expr: a leading zero is no octal number
    if [ "$candidate" -le "$started" ] && [ $((started - candidate)) -le 86400 ]; then scheduled=$candidate; fi
    ;;
esac

check() {
  case "$BENCHMARK_ACCELERATOR" in
    nvidia.com/gpu)
      # GKE's device plugin mounts the driver at /usr/local/nvidia and sets no PATH or library path for it
      # (GoogleCloudPlatform/container-engine-accelerators v1.0.20 cmd/nvidia_gpu/nvidia_gpu.go, pkg/gpu/nvidia/
      # manager.go); elsewhere the NVIDIA container toolkit mounts nvidia-smi and NVML for the `utility`
      # capability (NVIDIA/libnvidia-container src/nvc_info.c utility_bins, utility_libs).
      PATH="$PATH:/usr/local/nvidia/bin" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/nvidia/lib64" \
        nvidia-smi -L
      ;;
    # TPU v5e and later: /dev/vfio/<N> (v4: /dev/accel<N>), as gVisor's TPU proxy lists them (google/gvisor
    # runsc/cmd/chroot.go tpuProxyUpdateChroot).
    google.com/tpu) ls /dev/vfio/[0-9]* /dev/accel[0-9]* 2>/dev/null | grep . ;;
    # Neuron devices reach the container as /dev/neuron<N> (aws-neuron/aws-neuron-sdk deploy/infrastructure/
    # scheduler-flow.rst).
    aws.amazon.com/neuron) ls /dev/neuron[0-9]* ;;
    *)
      echo "probe: unknown accelerator resource '$BENCHMARK_ACCELERATOR'"
      return 1
      ;;
  esac
}

if check; then ok=1; else ok=0; fi
echo "gpufleet probe card=${BENCHMARK_GPU:-unknown} accelerator=${BENCHMARK_ACCELERATOR:-unknown} scheduled=$scheduled started=$started success=$ok"
[ "$ok" = 1 ]
