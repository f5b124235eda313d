"""A pod's containers waiting (fleet/tools/doctor/pods.py): an image that cannot be pulled."""

from __future__ import annotations

from kubernetes import client as k8s

from tests.tools.doctor.support import leaf_of, pending_row
from tests.tools.doctor.world import healthy, make_pending


def test_an_image_that_cannot_be_pulled_names_the_image_and_where_it_is_set(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    bench = next(b for b in fleet.benchmarks(cluster) if b.pool is pool and not b.schedule)
    image = bench.workload.spec.image
    make_pending(
        world,
        fleet,
        cluster,
        pool,
        node_name=world.nodes[1].metadata.name,
        conditions=[k8s.V1PodCondition(type="PodScheduled", status="True")],
        container_statuses=[
            k8s.V1ContainerStatus(
                name="workload",
                image=image,
                image_id="",
                ready=False,
                restart_count=0,
                state=k8s.V1ContainerState(
                    waiting=k8s.V1ContainerStateWaiting(
                        reason="ImagePullBackOff", message=f'Back-off pulling image "{image}"'
                    )
                ),
            )
        ],
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = pending_row(result, fleet, cluster, pool)
    assert "FAIL" in row and "ImagePullBackOff" in row and image in row
    assert f"workloads/{bench.workload.name}/workload.yaml" in row and f"docker manifest inspect {image}" in row
