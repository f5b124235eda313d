"""The benchmark queue of each cluster: which pools Kueue queues a cluster's benchmarks on, and their quotas."""
