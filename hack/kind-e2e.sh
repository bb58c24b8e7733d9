#!/usr/bin/env bash
# Runs the e2e suite (tests/e2e, the same tests `make test` runs on the local control plane) on a kind
# cluster: 1 control plane + 1 worker whose node status advertises 8 fake huawei.com/Ascend910 NPUs.
#
# Why a separate path: kind needs a Docker engine, which the project's own CI machines do not have; users
# and GitHub Actions (.github/workflows/e2e-kind.yaml) do. The suite only needs AIS_E2E_KUBECONFIG, so
# nothing in the tests differs. KWOK also runs here (out of cluster, managing only nodes annotated
# kwok.x-k8s.io/node=fake) so the tests that add fake Atlas nodes work on kind too.
#
# Needs: docker, kind, kubectl, go, curl, and the project venv (bash hack/venv.sh).
# Env: KIND_CLUSTER_NAME (default ais-e2e), AIS_OPERATOR_IMAGE (default ascend-operator:e2e),
#      AIS_KEEP_CLUSTER=1 to keep the cluster afterwards.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cluster="${KIND_CLUSTER_NAME:-ais-e2e}"
image="${AIS_OPERATOR_IMAGE:-ascend-operator:e2e}"
kwok_version="${AIS_KWOK_VERSION:-v0.8.0}"
gie_version="${AIS_GIE_VERSION:-v1.0.0}"
work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [[ "${AIS_KEEP_CLUSTER:-}" != 1 ]]; then kind delete cluster --name "$cluster" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== kind cluster $cluster" >&2
kind create cluster --name "$cluster" --wait 180s --config - <<'YAML'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
- role: worker
YAML
export KUBECONFIG="$work/kubeconfig"
kind get kubeconfig --name "$cluster" >"$KUBECONFIG"
kubectl wait --for=condition=Ready nodes --all --timeout=180s

echo "== advertising 8 x huawei.com/Ascend910 on the worker" >&2
worker="$(kubectl get nodes -l '!node-role.kubernetes.io/control-plane' -o jsonpath='{.items[0].metadata.name}')"
kubectl label node "$worker" accelerator=huawei-Ascend910 node.kubernetes.io/npu.chip.name=910B4-1 --overwrite
# Extended resources are advertised through the node's status subresource (what a device plugin's
# kubelet does); kubectl proxy handles authentication so a plain JSON patch works. "~1" escapes "/".
kubectl proxy --port=0 >"$work/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q 'Starting to serve' "$work/proxy.log" && break; sleep 0.2; done
proxy="http://$(sed -n 's/.*Starting to serve on \(.*\)/\1/p' "$work/proxy.log")"
curl --fail --silent --show-error -X PATCH -H 'Content-Type: application/json-patch+json' \
  --data '[{"op":"add","path":"/status/capacity/huawei.com~1Ascend910","value":"8"},
           {"op":"add","path":"/status/allocatable/huawei.com~1Ascend910","value":"8"}]' \
  "$proxy/api/v1/nodes/$worker/status" >/dev/null
kubectl get node "$worker" -o jsonpath='{.status.allocatable.huawei\.com/Ascend910}' | grep -qx 8

echo "== operator image $image" >&2
docker build -t "$image" -f operator/Dockerfile .
kind load docker-image "$image" --name "$cluster"
# The stand-in engine for pods that land on the real kind worker: its `vllm` is the simulator.
docker build -t "${AIS_SIM_IMAGE:-aissim:e2e}" -f simulator/Dockerfile .
kind load docker-image "${AIS_SIM_IMAGE:-aissim:e2e}" --name "$cluster"

echo "== CRDs" >&2
kubectl apply -f crds/
kubectl wait --for=condition=Established crd --all --timeout=60s

# LeaderWorkerSet for the multi-node tests, installed the way its users do: the release manifest
# (sigs.k8s.io/lws v0.7.0 site/content/en/docs/installation/_index.md:43-49), which runs its controller with cert-controller webhooks.
lws_version="${AIS_LWS_VERSION:-v0.7.0}"
echo "== LeaderWorkerSet $lws_version" >&2
kubectl apply --server-side -f "https://github.com/kubernetes-sigs/lws/releases/download/$lws_version/manifests.yaml"
kubectl wait --for=condition=Available deployment/lws-controller-manager -n lws-system --timeout=300s

echo "== KWOK $kwok_version for fake Atlas nodes added by the tests" >&2
GOBIN="$work/bin" go install "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"
"$work/bin/kwok" --kubeconfig="$KUBECONFIG" --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake --cidr=127.1.255.0/24 \
  --node-ip=127.2.255.1 --node-lease-duration-seconds=40 \
  --config=hack/kwok/pod-stages.yaml --config=hack/kwok/node-stages.yaml >"$work/kwok.log" 2>&1 &
pids+=($!)

echo "== Gateway API Inference Extension ${gie_version} InferencePool CRD (the routing tests install it)" >&2
gie_dir="$(cd "$work" && go mod download -json "sigs.k8s.io/gateway-api-inference-extension@$gie_version" |
  sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"

echo "== pytest -m e2e" >&2
AIS_E2E_KUBECONFIG="$KUBECONFIG" AIS_OPERATOR_IMAGE="$image" AIS_KUBECTL="$(command -v kubectl)" \
  AIS_GIE_CRD="$gie_dir/config/crd/bases/inference.networking.k8s.io_inferencepools.yaml" \
  .venv/bin/pytest -m e2e tests/e2e "$@"
