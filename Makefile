# Two commands a newcomer needs: `make demo` (the main job, locally) and `make test` (everything CI runs).
.PHONY: test lint unit demo venv crd
venv:
	bash hack/venv.sh
test:
	bash hack/test.sh
demo: venv
	.venv/bin/python hack/demo.py $(DEMO_ARGS)
lint: venv
	.venv/bin/ruff check operator simulator tests perf harness hack
	.venv/bin/mypy
unit: venv
	.venv/bin/pytest -m "not e2e and not ansible"

crd: venv
	.venv/bin/aisctl crd > crds/inference.ascend.dev_ascendinferenceservices.yaml
	.venv/bin/aisctl crd > charts/ascend-inference-operator/crds/inference.ascend.dev_ascendinferenceservices.yaml
	.venv/bin/python -m ascend_operator.clients.rbac > charts/ascend-inference-operator/templates/_owned-rules.tpl
	.venv/bin/python -m ascend_operator.clients.rbac --readme charts/ascend-inference-operator/README.md

docs: venv
	.venv/bin/python -m ascend_operator.reference docs/api.md
