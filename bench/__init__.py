"""On-demand benchmarks: simulator sweep against the seed, detector trace replay against the peers."""
