"""The local harness the tests, the demo (hack/demo.py) and the on-demand experiments (perf/) share: the local
control plane (`cluster`), the real engine's process groups (`engines`), a ServiceAccount's kubeconfig
(`kubeconfig`), synthetic engine traces and their replay through the operator's health machine (`traces`,
`replay`), process memory (`procs`), closed-loop load against simulators (`loadgen`).

Why a package of its own: the demo and perf/ had imported these from tests/ (and a simulator test imported
perf/), so a test module's fixture change could break the demo, and perf/ could not run without the test
tree. Now tests/, hack/ and perf/ import this, and it imports none of them (tests/unit/test_layers.py).
"""
