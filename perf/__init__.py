"""On-demand experiments, run by hand (`python -m perf.<name>`): the simulator sweep against the seed, the
detector trace replay against the peers, the operator's scale and memory costs. Tests run some of them at a
small size (tests/e2e/test_scale.py, tests/health/test_bench_detectors.py). Their committed raw results are in
perf/results/; the fixtures tests share with them are in tests/fixtures/."""
