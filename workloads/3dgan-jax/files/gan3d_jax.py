#!/usr/bin/env python3
"""3DGAN training in JAX, data-parallel over every accelerator of a job: the fleet's scaling-sweep workload.

The network has the layer shapes of the CERN openlab 3DGAN (CERN-IT-INNOVATION/3DGAN, MIT licence,
``Accelerated3DGAN/src/Accelerated3DGAN/gan_models.py``): a generator from a 256-long latent vector (noise times
the particle energy) through a 5184-unit dense layer, a (9, 9, 8, 8) reshape, a 6x up-sampling and six 3D
convolutions to a 51x51x25 calorimeter image, and a discriminator of four 3D convolutions with batch normalisation
and average pooling, whose heads say real or fake and regress the particle's energy; the losses weigh real/fake,
energy and the image's energy sum 3 : 0.1 : 0.1 as there (the angle head is left out). It is written here, not
copied, because the shipped 3DGAN image's script is not public and the public code reads its showers from EOS.
The showers are synthetic (a Gaussian core with a longitudinal profile whose sum follows the energy), drawn on
each process from a seed, so a run needs no data and every accelerator count trains on the same stream.

Distribution is JAX's own: one process per node (Kubeflow Trainer's ``jax`` policy sets ``JAX_NUM_PROCESSES``,
``JAX_PROCESS_ID`` and ``JAX_COORDINATOR_ADDRESS``), every local device holds a replica, the global batch is
sharded over all devices and XLA averages the gradients across them. Without those variables it runs alone on the
local devices. The global number of samples per epoch is fixed, so more accelerators mean fewer steps per epoch
(strong scaling, as in the original study).

Each process prints one line per timed epoch for the mtail sidecar:

    gan3d-jax epoch=2 seconds=4.8123 steps=8 accelerators=4 worker=1 attempt=0 d_loss=... g_loss=...

``accelerators`` is the job's size (``GPUFLEET_ACCELERATORS``, the sweep point; JAX's device count when unset),
``worker`` the process, ``attempt`` the JobSet restart attempt
(``GPUFLEET_RESTART_ATTEMPT``). The first step of a run compiles and is timed apart (``gan3d-jax compile``). With
``--checkpoint-dir``, worker 0 saves the weights after every epoch and a restarted job resumes after the last saved
epoch (``gan3d-jax resumed``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

LATENT = 256
IMAGE = (51, 51, 25)
LOSS_WEIGHTS = (3.0, 0.1, 0.1)  # real/fake, energy, energy sum (gan_training.py compute_global_loss)
LEAK = 0.3  # tf.keras LeakyReLU's default slope
BN_EPSILON = 1e-6
DROPOUT = 0.2


def line(kind: str, **fields: Any) -> str:
    """One log line: ``gan3d-jax <kind> key=value ...`` (floats with four decimals)."""
    parts = [f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items()]
    return " ".join(["gan3d-jax", kind, *parts])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--samples-per-epoch", type=int, default=12800, help="global, split over all devices")
    parser.add_argument("--batch-per-device", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--checkpoint-dir", default=os.environ.get("GPUFLEET_CHECKPOINT_DIR", ""))
    args = parser.parse_args(argv)
    for name in ("epochs", "samples_per_epoch", "batch_per_device"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def distributed_setup(jax: Any) -> None:
    """Join the job's other processes when Trainer's JAX variables say there are any."""
    count = int(os.environ.get("JAX_NUM_PROCESSES", "1"))
    if count > 1:
        # jax.distributed.initialize reads JAX_COORDINATOR_ADDRESS itself, but not the count or the process id
        jax.distributed.initialize(num_processes=count, process_id=int(os.environ["JAX_PROCESS_ID"]))


def build(jax: Any, jnp: Any, lax: Any) -> dict[str, Any]:
    """The networks, losses and one jitted training step, as closures over jax."""

    def dense_init(key: Any, n_in: int, n_out: int) -> dict[str, Any]:
        limit = (6.0 / (n_in + n_out)) ** 0.5
        return {"w": jax.random.uniform(key, (n_in, n_out), minval=-limit, maxval=limit), "b": jnp.zeros(n_out)}

    def conv_init(key: Any, kernel: tuple[int, int, int], c_in: int, c_out: int) -> dict[str, Any]:
        fan_in = c_in * kernel[0] * kernel[1] * kernel[2]
        limit = (6.0 / fan_in) ** 0.5  # he_uniform
        w = jax.random.uniform(key, (*kernel, c_in, c_out), minval=-limit, maxval=limit)
        return {"w": w, "b": jnp.zeros(c_out)}

    gen_convs = [((6, 6, 8), 8, 8), ((4, 4, 6), 8, 6), ((4, 4, 6), 6, 6), ((4, 4, 6), 6, 6), ((3, 3, 5), 6, 6)]
    gen_convs += [((3, 3, 3), 6, 6), ((2, 2, 2), 6, 1)]
    gen_pads = [None, (2, 2, 1), (2, 2, 1), (2, 2, 1), (1, 1, 0), (1, 1, 0), None]
    disc_convs = [((5, 6, 6), 1, 16), ((5, 6, 6), 16, 8), ((5, 6, 6), 8, 8), ((5, 6, 6), 8, 8)]
    disc_pads = [None, (0, 0, 1), (0, 0, 1), None]

    def init(key: Any) -> dict[str, Any]:
        keys = iter(jax.random.split(key, 32))
        gen = {"dense": dense_init(next(keys), LATENT, 5184), "convs": [conv_init(next(keys), *c) for c in gen_convs]}
        disc = {"convs": [conv_init(next(keys), *c) for c in disc_convs]}
        flat = 19 * 18 * 7 * 8  # (39, 36, 14, 8) after the convolutions, halved by the average pooling
        disc["fake"] = dense_init(next(keys), flat, 1)
        disc["aux"] = dense_init(next(keys), flat, 1)
        return {"gen": gen, "disc": disc}

    def conv(x: Any, p: dict[str, Any], same: bool = False) -> Any:
        y = lax.conv_general_dilated(
            x, p["w"], (1, 1, 1), "SAME" if same else "VALID", dimension_numbers=("NDHWC", "DHWIO", "NDHWC")
        )
        return y + p["b"]

    def pad(x: Any, widths: tuple[int, int, int] | None) -> Any:
        if widths is None:
            return x
        return jnp.pad(x, [(0, 0)] + [(w, w) for w in widths] + [(0, 0)])

    def batch_norm(x: Any) -> Any:  # training-mode statistics over the (global) batch and space
        mean = x.mean(axis=(0, 1, 2, 3))
        var = x.var(axis=(0, 1, 2, 3))
        return (x - mean) / jnp.sqrt(var + BN_EPSILON)

    def generator(params: dict[str, Any], latent: Any) -> Any:
        x = latent @ params["dense"]["w"] + params["dense"]["b"]
        x = x.reshape((-1, 9, 9, 8, 8))
        for axis in (1, 2, 3):
            x = jnp.repeat(x, 6, axis=axis)  # UpSampling3D((6, 6, 6))
        convs = params["convs"]
        for i, (p, widths) in enumerate(zip(convs, gen_pads, strict=True)):
            x = conv(pad(x, widths), p)
            x = jax.nn.relu(x)
            if i < len(convs) - 2:
                x = batch_norm(x)
        return x  # (batch, 51, 51, 25, 1)

    def discriminator(params: dict[str, Any], image: Any, key: Any) -> tuple[Any, Any]:
        x = image
        for i, (p, widths) in enumerate(zip(params["convs"], disc_pads, strict=True)):
            x = jax.nn.leaky_relu(conv(pad(x, widths), p, same=(i == 0)), LEAK)
            if i > 0:
                x = batch_norm(x)
            key, sub = jax.random.split(key)
            keep = jax.random.bernoulli(sub, 1.0 - DROPOUT, x.shape)
            x = jnp.where(keep, x / (1.0 - DROPOUT), 0.0)
        b, d, h, w, c = x.shape
        x = x[:, : d // 2 * 2, : h // 2 * 2, : w // 2 * 2]
        x = x.reshape(b, d // 2, 2, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4, 6))  # AveragePooling3D((2, 2, 2))
        flat = x.reshape(b, -1)
        fake = jax.nn.sigmoid(flat @ params["fake"]["w"] + params["fake"]["b"])[:, 0]
        aux = (flat @ params["aux"]["w"] + params["aux"]["b"])[:, 0]
        return fake, aux

    def bce(p: Any, target: float) -> Any:
        p = jnp.clip(p, 1e-7, 1.0 - 1e-7)
        return -(target * jnp.log(p) + (1.0 - target) * jnp.log(1.0 - p)).mean()

    def mape(pred: Any, true: Any) -> Any:
        return (100.0 * jnp.abs(true - pred) / jnp.maximum(jnp.abs(true), 1e-7)).mean()

    def disc_terms(disc: dict[str, Any], images: Any, energy: Any, target: float, key: Any) -> Any:
        fake, aux = discriminator(disc, images, key)
        ecal = images.sum(axis=(1, 2, 3, 4))
        # the energy-sum head is a fixed function of the image (a Lambda layer): its loss trains the generator
        w_fake, w_aux, _ = LOSS_WEIGHTS
        return w_fake * bce(fake, target) + w_aux * mape(aux, energy), ecal

    def losses(params: dict[str, Any], real: Any, energy: Any, noise: Any, key: Any) -> tuple[Any, Any]:
        k1, k2, k3 = jax.random.split(key, 3)
        generated = generator(params["gen"], noise * energy[:, None])
        d_real, _ = disc_terms(params["disc"], real, energy, 1.0, k1)
        d_fake, _ = disc_terms(params["disc"], lax.stop_gradient(generated), energy, 0.0, k2)
        g_adv, g_ecal = disc_terms(params["disc"], generated, energy, 1.0, k3)
        g_loss = g_adv + LOSS_WEIGHTS[2] * mape(g_ecal, real.sum(axis=(1, 2, 3, 4)))
        return 0.5 * (d_real + d_fake), g_loss

    def rmsprop(params: Any, grads: Any, state: Any, lr: float) -> tuple[Any, Any]:
        state = jax.tree.map(lambda s, g: 0.9 * s + 0.1 * g * g, state, grads)
        params = jax.tree.map(lambda p, g, s: p - lr * g / (jnp.sqrt(s) + 1e-7), params, grads, state)
        return params, state

    def step(params: Any, opt: Any, real: Any, energy: Any, noise: Any, key: Any, lr: float) -> tuple[Any, ...]:
        def d_objective(disc: Any) -> Any:
            return losses({"gen": params["gen"], "disc": disc}, real, energy, noise, key)[0]

        def g_objective(gen: Any) -> Any:
            return losses({"gen": gen, "disc": params["disc"]}, real, energy, noise, key)[1]

        d_loss, d_grads = jax.value_and_grad(d_objective)(params["disc"])
        g_loss, g_grads = jax.value_and_grad(g_objective)(params["gen"])
        disc, opt_d = rmsprop(params["disc"], d_grads, opt["disc"], lr)
        gen, opt_g = rmsprop(params["gen"], g_grads, opt["gen"], lr)
        return {"gen": gen, "disc": disc}, {"gen": opt_g, "disc": opt_d}, d_loss, g_loss

    return {"init": init, "step": jax.jit(step, static_argnums=6)}


def synthetic_showers(np: Any, rng: Any, count: int) -> tuple[Any, Any]:
    """``count`` calorimeter images (51x51x25, one channel) and their energies (100 GeV units, 1 to 5)."""
    energy = rng.uniform(1.0, 5.0, size=count).astype("float32")
    x = np.arange(IMAGE[0]) - IMAGE[0] // 2
    y = np.arange(IMAGE[1]) - IMAGE[1] // 2
    z = np.arange(IMAGE[2]) + 0.5
    width = rng.uniform(1.5, 3.0, size=count)
    core = np.exp(-(x[None, :, None] ** 2 + y[None, None, :] ** 2) / (2 * width[:, None, None] ** 2))
    depth = rng.uniform(4.0, 8.0, size=count)  # longitudinal maximum, deeper for more energy below
    profile = (z[None, :] / depth[:, None]) ** 2 * np.exp(-2.0 * z[None, :] / depth[:, None])
    images = core[:, :, :, None] * profile[:, None, None, :]
    images *= (0.02 * energy / images.sum(axis=(1, 2, 3)))[:, None, None, None]  # sampling fraction 2 %
    return images[..., None].astype("float32"), energy


def save_checkpoint(np: Any, jax: Any, path: str, epoch: int, params: Any, opt: Any) -> None:
    """Write the weights and optimiser state after ``epoch`` atomically (rename over the previous file)."""
    leaves = jax.tree.leaves({"params": params, "opt": opt})
    tmp = os.path.join(path, "checkpoint.tmp.npz")
    np.savez(tmp, epoch=np.array(epoch), **{f"leaf{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)})
    os.replace(tmp, os.path.join(path, "checkpoint.npz"))


def load_checkpoint(np: Any, jax: Any, path: str, params: Any, opt: Any) -> tuple[int, Any, Any]:
    """The last saved epoch and state, or (0, params, opt) when there is none."""
    file = os.path.join(path, "checkpoint.npz")
    if not path or not os.path.exists(file):
        return 0, params, opt
    with np.load(file) as saved:
        treedef = jax.tree.structure({"params": params, "opt": opt})
        leaves = [saved[f"leaf{i}"] for i in range(treedef.num_leaves)]
        state = jax.tree.unflatten(treedef, leaves)
        return int(saved["epoch"]), state["params"], state["opt"]


def main(argv: list[str] | None = None) -> int:
    """Train for ``--epochs`` epochs and print the timing lines; 0 on success."""
    args = parse_args(argv)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.experimental import multihost_utils
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    distributed_setup(jax)
    worker, devices, local = jax.process_index(), jax.device_count(), jax.local_device_count()
    attempt = os.environ.get("GPUFLEET_RESTART_ATTEMPT", "0")
    # the job's size as the fleet counts it (its cards or chips), else JAX's devices (the CPU recording)
    size = os.environ.get("GPUFLEET_ACCELERATORS", str(devices))
    tags = {"accelerators": size, "worker": worker, "attempt": attempt}
    global_batch = args.batch_per_device * devices
    steps = max(1, args.samples_per_epoch // global_batch)
    platform = jax.devices()[0].platform
    print(line("start", processes=jax.process_count(), local_devices=local, platform=platform, steps=steps, **tags))
    # automatic sharding: XLA places the gradients' all-reduce itself
    mesh = jax.make_mesh((devices,), ("data",), axis_types=(AxisType.Auto,))
    replicated = NamedSharding(mesh, P())
    net = build(jax, jnp, lax)
    params = net["init"](jax.random.key(args.seed))
    opt = jax.tree.map(jnp.zeros_like, params)
    first_epoch = 0
    if args.checkpoint_dir:
        os.makedirs(args.checkpoint_dir, exist_ok=True)
        first_epoch, params, opt = load_checkpoint(np, jax, args.checkpoint_dir, params, opt)
        # worker 0's checkpoint decides: the other workers may not see the same directory
        state = multihost_utils.broadcast_one_to_all((np.int32(first_epoch), params, opt))
        first_epoch, params, opt = int(state[0]), state[1], state[2]
        if first_epoch:
            print(line("resumed", epoch=first_epoch, **tags))
    params, opt = jax.device_put((params, opt), replicated)
    rng = np.random.default_rng([args.seed, worker])
    local_batch = args.batch_per_device * local

    def batch(step_key: Any) -> tuple[Any, Any, Any]:
        images, energy = synthetic_showers(np, rng, local_batch)
        noise = rng.normal(size=(local_batch, LATENT)).astype("float32")
        put = multihost_utils.host_local_array_to_global_array
        return put(images, mesh, P("data")), put(energy, mesh, P("data")), put(noise, mesh, P("data"))

    key = jax.random.key(args.seed + 1)
    started = time.perf_counter()
    real, energy, noise = batch(key)
    compiled = net["step"](params, opt, real, energy, noise, key, args.learning_rate)
    jax.block_until_ready(compiled)
    print(line("compile", seconds=time.perf_counter() - started, **tags), flush=True)
    for epoch in range(first_epoch + 1, args.epochs + 1):
        started = time.perf_counter()
        for _ in range(steps):
            key, sub = jax.random.split(key)
            real, energy, noise = batch(sub)
            params, opt, d_loss, g_loss = net["step"](params, opt, real, energy, noise, sub, args.learning_rate)
        d_loss, g_loss = float(d_loss), float(g_loss)  # waits for the epoch's last step
        seconds = time.perf_counter() - started
        if args.checkpoint_dir and worker == 0:  # saved before the line, so a line means a resumable epoch
            save_checkpoint(np, jax, args.checkpoint_dir, epoch, jax.device_get(params), jax.device_get(opt))
        print(
            line("epoch", epoch=epoch, seconds=seconds, steps=steps, d_loss=d_loss, g_loss=g_loss, **tags), flush=True
        )
    print(line("done", epochs=args.epochs, **tags), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
