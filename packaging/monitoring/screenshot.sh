#!/usr/bin/env bash
# Makes dashboard.png as it was made: the sandbox API server with 3 simulated nodes, this
# kube-controller-manager (its /metrics open to anonymous scrapes), Prometheus (Debian package
# `prometheus`) scraping it every 2 s, Deployments created, scaled and deleted for a few
# minutes, then render.py drawing the dashboard's queries from Prometheus' HTTP API
# (Grafana has no package here). Needs `cargo build --bins` and `pip install matplotlib`.
# Usage: packaging/monitoring/screenshot.sh [minutes of load, default 4]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${CARGO_TARGET_DIR:-$here/../../target}/debug
minutes=${1:-4}
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
"$bin/kcm-sandbox" serve --listen 127.0.0.1:16443 --nodes 3 --kubeconfig-out "$work/sandbox/admin.conf" >serve.log 2>&1 &
pids+=($!)
until [[ -s sandbox/controller-manager.conf ]]; do sleep 0.5; done
python3 -c "
import base64, yaml
user = yaml.safe_load(open('sandbox/admin.conf'))['users'][0]['user']
open('admin.crt', 'wb').write(base64.b64decode(user['client-certificate-data']))
open('admin.key', 'wb').write(base64.b64decode(user['client-key-data']))"
"$bin/kube-controller-manager" --kubeconfig=sandbox/controller-manager.conf --leader-elect=true \
  --bind-address=127.0.0.1 --secure-port=10299 --authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics \
  --use-service-account-credentials=true --service-account-private-key-file=sandbox/sa.key --root-ca-file=sandbox/ca.crt \
  --cluster-signing-cert-file=sandbox/ca.crt --cluster-signing-key-file=sandbox/ca.key \
  --allocate-node-cidrs=true --cluster-cidr=10.244.0.0/16 -v=1 >kcm.log 2>&1 &
pids+=($!)
cat >prom.yml <<'YAML'
global:
  scrape_interval: 2s
scrape_configs:
  - job_name: kube-controller-manager
    scheme: https
    tls_config:
      insecure_skip_verify: true
    static_configs:
      - targets: ["127.0.0.1:10299"]
YAML
prometheus --config.file=prom.yml --storage.tsdb.path="$work/prom" --web.listen-address=127.0.0.1:19090 >prom.log 2>&1 &
pids+=($!)
api="curl -sk --cert admin.crt --key admin.key -H Content-Type:application/json https://127.0.0.1:16443/apis/apps/v1/namespaces/default/deployments"
deployment() {
  echo "{\"metadata\":{\"name\":\"$1\"},\"spec\":{\"replicas\":$2,\"selector\":{\"matchLabels\":{\"app\":\"$1\"}},\
\"template\":{\"metadata\":{\"labels\":{\"app\":\"$1\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}}}"
}
rounds=$((minutes * 60 / 14))
for round in $(seq 1 "$rounds"); do
  for i in 1 2 3; do $api -X POST -d "$(deployment "web-$round-$i" $((round % 4 + 1)))" >/dev/null; done
  sleep 7
  for i in 1 2 3; do
    $api/web-$round-$i -X PATCH -H Content-Type:application/merge-patch+json -d '{"spec":{"replicas":5}}' >/dev/null
  done
  sleep 7
  if ((round > 2)); then for i in 1 2 3; do $api/web-$((round - 2))-$i -X DELETE >/dev/null; done; fi
done
python3 "$here/render.py" http://127.0.0.1:19090 "$minutes" "$here/dashboard.png"
