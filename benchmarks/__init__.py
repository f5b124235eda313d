"""Benchmarks of gpu-fleet (scripts, not tests): see benchmarks/README.md."""
