#!/usr/bin/env python3
"""Time pyhf hypothesis-test fits on one backend; print one line per fit for the mtail sidecar.

``pyhf cls --backend jax ws.json`` prints the CLs values but no timing, so this wrapper runs the same
asymptotic hypothesis test (``pyhf.infer.hypotest``, the fit behind ``pyhf cls``) N times and prints:

    pyhf fit backend=jax duration_seconds=0.4123 cls_obs=0.0523

The first fits are warm-ups (JAX compiles its kernels there) and print ``pyhf warmup ...`` instead, which
the mtail program ignores. The workspace is built in memory (a falling background with a peaked signal,
``--bins`` bins) unless ``--workspace`` names a pyhf JSON workspace.

Mounted at /opt/gpu-fleet/timed_fit.py in the ``pyhf/cuda`` image. pyhf is imported only in ``main``, so
the file can be syntax-checked and its output format tested without pyhf installed.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

BACKENDS = ("numpy", "jax", "pytorch", "tensorflow")


def fit_line(kind: str, backend: str, duration: float, cls_obs: float) -> str:
    """The line the mtail program parses (``kind`` is ``fit`` or ``warmup``)."""
    return f"pyhf {kind} backend={backend} duration_seconds={duration:.4f} cls_obs={cls_obs:.6g}"


def synthetic_spectrum(bins: int) -> tuple[list[float], list[float], list[float], list[float]]:
    """Signal, background, background uncertainty and observed counts of a deterministic toy analysis."""
    width = max(bins / 20.0, 1.0)
    signal = [25.0 * math.exp(-0.5 * ((i - bins / 2.0) / width) ** 2) for i in range(bins)]
    background = [1000.0 * math.exp(-3.0 * i / bins) + 50.0 for i in range(bins)]
    uncertainty = [0.1 * b for b in background]
    observed = [float(round(b)) for b in background]  # background-only observation
    return signal, background, uncertainty, observed


def build_model(pyhf, bins: int):
    """A one-channel model with uncorrelated background uncertainties, and its observed data."""
    signal, background, uncertainty, observed = synthetic_spectrum(bins)
    # pyhf >= 0.6.2 names it uncorrelated_background; the 0.6.1 image only has hepdata_like.
    make = getattr(pyhf.simplemodels, "uncorrelated_background", None) or pyhf.simplemodels.hepdata_like
    model = make(signal, background, uncertainty)
    return model, observed + model.config.auxdata


def load_model(pyhf, path: str):
    """The first measurement's model of a pyhf JSON workspace, and its observed data."""
    with open(path, encoding="utf-8") as handle:
        workspace = pyhf.Workspace(json.load(handle))
    model = workspace.model()
    return model, workspace.data(model)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKENDS, default="jax", help="pyhf tensor backend (default: jax)")
    parser.add_argument("--fits", type=int, default=20, help="timed fits to run and print (default: 20)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed warm-up fits first (default: 2)")
    parser.add_argument("--bins", type=int, default=200, help="bins of the built-in model (default: 200)")
    parser.add_argument("--poi", type=float, default=1.0, help="signal strength tested (default: 1.0)")
    parser.add_argument("--workspace", help="a pyhf JSON workspace to fit instead of the built-in model")
    args = parser.parse_args(argv)
    if args.fits < 1 or args.warmup < 0 or args.bins < 1:
        parser.error("--fits and --bins must be positive and --warmup not negative")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the warm-up and timed fits, one printed line each, then a summary line."""
    args = parse_args(argv)
    import pyhf  # lazily: the file must load without pyhf

    pyhf.set_backend(args.backend)
    if args.workspace:
        model, data = load_model(pyhf, args.workspace)
        source = args.workspace
    else:
        model, data = build_model(pyhf, args.bins)
        source = f"built-in ({args.bins} bins)"
    data = pyhf.tensorlib.astensor(data)
    print(f"timed_fit: pyhf {pyhf.__version__}, backend {args.backend}, workspace {source}, poi {args.poi}", flush=True)
    if args.backend == "jax":
        import jax

        print(f"timed_fit: jax {jax.__version__} devices {jax.devices()}", flush=True)

    durations = []
    for n in range(args.warmup + args.fits):
        start = time.perf_counter()
        # float() waits for the result: JAX and PyTorch dispatch asynchronously.
        cls_obs = float(pyhf.infer.hypotest(args.poi, data, model))
        duration = time.perf_counter() - start
        warm = n >= args.warmup
        if warm:
            durations.append(duration)
        print(fit_line("fit" if warm else "warmup", args.backend, duration, cls_obs), flush=True)

    print(
        f"timed_fit: backend {args.backend}: {len(durations)} fits, "
        f"median {statistics.median(durations):.4f} s, min {min(durations):.4f} s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
