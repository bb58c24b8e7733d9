"""On-demand experiments (run by hand, not by `make test`): the simulator sweep against the seed, the detector
trace replay against the peers, the operator's scale and memory costs. Their committed raw results are in
perf/results/; the fixtures tests share with them are in tests/fixtures/."""
