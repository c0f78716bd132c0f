#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1 for the end-to-end tests: etcd, kube-apiserver
# (TLS, RBAC, service-account tokens), kube-scheduler and kube-controller-manager.
#
#   scripts/kube-control-plane.sh build               build once per machine, cached
#   scripts/kube-control-plane.sh up DIR [--name N]   start one; last line KUBECONFIG=DIR/admin.kubeconfig
#   scripts/kube-control-plane.sh down DIR            stop it (apiserver before etcd)
#
# No registry these machines reach ships the binaries, so `build` compiles them from Debian's
# source package of Kubernetes 1.20.2 (it carries its vendor/ tree) with Debian's Go 1.19,
# offline, into a cache outside the repo (docs/kubernetes-control-plane.md; ADR 0128).
set -euo pipefail

VERSION=1.20.2
CACHE="${SYNTHFACTORY_CACHE:-$HOME/.cache/synthfactory}/kube-$VERSION"
BIN="$CACHE/bin"
BINARIES=(kube-apiserver kube-scheduler kube-controller-manager etcd)

die() { echo "kube-control-plane: $*" >&2; exit 1; }
log() { echo "kube-control-plane: $*" >&2; }

built() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
}

# A private apt set-up: the machine's own bookworm entries as deb and deb-src, with lists and
# archives of its own, so the machine's apt state is never touched.
private_apt() {
  local apt="$CACHE/apt"
  mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/parts" "$apt/prefs"
  : > "$apt/sources.list"
  local uris suites line kind
  # /etc/apt/sources.list.d/debian.sources (deb822) or a one-line sources.list
  if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
    awk '/^URIs:/{u=$2} /^Suites:/{$1=""; s=$0} /^$/{if(u)print u"|"s; u=""} END{if(u)print u"|"s}' \
      /etc/apt/sources.list.d/debian.sources > "$apt/entries"
  else
    grep -E '^deb ' /etc/apt/sources.list | awk '{print $2"|"$3}' > "$apt/entries"
  fi
  [[ -s "$apt/entries" ]] || die "no Debian sources found in /etc/apt to build from"
  while IFS='|' read -r uris suites; do
    for line in $suites; do
      for kind in deb deb-src; do
        echo "$kind [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uris $line main" \
          >> "$apt/sources.list"
      done
    done
  done < "$apt/entries"
  cat > "$apt/apt.conf" <<EOF
Dir::Etc::SourceList "$apt/sources.list";
Dir::Etc::SourceParts "$apt/parts";
Dir::Etc::Preferences "$apt/prefs/none";
Dir::Etc::PreferencesParts "$apt/prefs";
Dir::State::Lists "$apt/lists";
Dir::Cache "$apt/cache";
Dir::Cache::Archives "$apt/archives";
APT::Sandbox::User "root";
EOF
  mkdir -p "$apt/cache"
  echo "$apt/apt.conf"
}

build() {
  if built; then log "already built in $BIN"; return 0; fi
  local started=$SECONDS
  mkdir -p "$CACHE/src" "$CACHE/root" "$BIN"
  local conf; conf=$(private_apt)
  export APT_CONFIG="$conf"
  log "fetching Debian's kubernetes source package, Go 1.19 and etcd (private apt config $conf)"
  apt-get -qq update
  (cd "$CACHE/src" && apt-get -qq source --download-only kubernetes &&
     apt-get -qq download etcd-server golang-1.19-go golang-1.19-src golang-github-modern-go-reflect2-dev)
  local deb
  for deb in "$CACHE"/src/*.deb; do dpkg -x "$deb" "$CACHE/root"; done
  local tree="$CACHE/src/kubernetes"
  rm -rf "$tree"
  (cd "$CACHE/src" && dpkg-source --no-check -x ./kubernetes_*.dsc "$tree" >/dev/null)
  # vendored reflect2 1.0.1 crashes the apiserver under Go >= 1.18 (fatal error: fault in
  # runtime.mapiterinit on the first create of a large custom object): use Debian's 1.0.2
  local reflect2="$tree/vendor/github.com/modern-go/reflect2"
  rm -rf "$reflect2"
  cp -r "$CACHE/root/usr/share/gocode/src/github.com/modern-go/reflect2" "$reflect2"
  find "$reflect2" \( -name '*_test.go' -o -name go.mod -o -name go.sum \) -delete
  log "building kube-apiserver, kube-scheduler, kube-controller-manager (several minutes)"
  local goroot="$CACHE/root/usr/lib/go-1.19"
  (cd "$tree" && PATH="$goroot/bin:$PATH" GOROOT="$goroot" GOPROXY=off GOFLAGS="${KUBE_BUILD_GOFLAGS--tags=providerless}" GO111MODULE=off \
     CGO_ENABLED=0 KUBE_GIT_VERSION="v$VERSION" KUBE_GIT_TREE_STATE=clean \
     GOCACHE="$CACHE/gocache" nice -n 19 \
     make WHAT="cmd/kube-apiserver cmd/kube-scheduler cmd/kube-controller-manager" >"$CACHE/build.log" 2>&1) \
    || die "build failed; see $CACHE/build.log"
  local out
  for b in kube-apiserver kube-scheduler kube-controller-manager; do
    out=$(find "$tree/_output" -type f -name "$b" -perm -u+x | head -1)
    [[ -n "$out" ]] || die "the build made no $b; see $CACHE/build.log"
    cp "$out" "$BIN/$b"
  done
  cp "$CACHE/root/usr/bin/etcd" "$BIN/etcd"
  # the build tree (2 GB) is not needed again; the binaries are
  rm -rf "$tree" "$CACHE/gocache"
  log "built in $((SECONDS - started)) s: $BIN"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

pki() {  # a CA, the apiserver's serving cert, the service-account key pair
  local dir=$1
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=synthfactory-e2e-ca" \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$dir/apiserver.key" -out "$dir/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' > "$dir/san.ext"
  openssl x509 -req -in "$dir/apiserver.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 30 -extfile "$dir/san.ext" -out "$dir/apiserver.crt" 2>/dev/null
  # the node agents' kubelet endpoint: the apiserver checks it against the CA
  openssl req -newkey rsa:2048 -nodes -subj "/CN=node-agent" \
    -keyout "$dir/kubelet.key" -out "$dir/kubelet.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$dir/kubelet.ext"
  openssl x509 -req -in "$dir/kubelet.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 30 -extfile "$dir/kubelet.ext" -out "$dir/kubelet.crt" 2>/dev/null
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
}

kubeconfig() {  # kubeconfig FILE PORT TOKEN NAME
  local ca; ca=$(base64 -w0 < "$(dirname "$1")/pki/ca.crt")
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $4
  cluster:
    server: https://127.0.0.1:$2
    certificate-authority-data: $ca
users:
- name: $4-admin
  user:
    token: $3
contexts:
- name: $4
  context: {cluster: $4, user: $4-admin}
current-context: $4
EOF
  chmod 600 "$1"
}

up() {
  local dir="" name="e2e"
  while (($#)); do
    case $1 in
      --name) name=${2:?--name needs a value}; shift 2 ;;
      -*) die "up: unknown option $1" ;;
      *) dir=$1; shift ;;
    esac
  done
  [[ -n "$dir" ]] || die "up: give a folder (up DIR [--name NAME])"
  built || die "not built: run '$0 build' first (make kube-control-plane)"
  mkdir -p "$dir/pki" "$dir/etcd" "$dir/logs" "$dir/pids"
  dir=$(cd "$dir" && pwd)
  alive "$dir/pids/kube-apiserver" && die "up: a control plane already runs in $dir"
  local started=$SECONDS
  pki "$dir/pki"
  local admin scheduler controller
  admin=$(openssl rand -hex 16); scheduler=$(openssl rand -hex 16); controller=$(openssl rand -hex 16)
  # the static tokens of the control plane's own users; every other caller uses a
  # ServiceAccount token and is held to RBAC
  {
    echo "$admin,admin,admin,system:masters"
    echo "$scheduler,system:kube-scheduler,system:kube-scheduler"
    echo "$controller,system:kube-controller-manager,system:kube-controller-manager"
  } > "$dir/pki/tokens.csv"
  chmod 600 "$dir/pki/tokens.csv"
  # who called what (the synthfactory namespace's ServiceAccounts, metadata level): the
  # verbs each one needed are read back from this log (tests/support/kube_control_plane.py,
  # docs/kubernetes-rbac.md)
  cat > "$dir/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:synthfactory"]
- level: None
EOF
  local etcd_client etcd_peer api_port
  etcd_client=$(free_port); etcd_peer=$(free_port); api_port=$(free_port)
  echo "$api_port" > "$dir/port"

  "$BIN/etcd" --name "$name" --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_client" \
    --advertise-client-urls "http://127.0.0.1:$etcd_client" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "$name=http://127.0.0.1:$etcd_peer" \
    >"$dir/logs/etcd.log" 2>&1 &
  echo $! > "$dir/pids/etcd"
  wait_for 30 etcd curl -sf "http://127.0.0.1:$etcd_client/health" \
    || { down "$dir"; die "etcd did not become healthy in 30 s; see $dir/logs/etcd.log"; }

  "$BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_client" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --insecure-port 0 \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --client-ca-file "$dir/pki/ca.crt" \
    --token-auth-file "$dir/pki/tokens.csv" \
    --authorization-mode RBAC \
    --service-account-key-file "$dir/pki/sa.pub" \
    --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-account-issuer "https://kubernetes.default.svc" \
    --service-cluster-ip-range 10.96.0.0/16 \
    --kubelet-preferred-address-types InternalIP \
    --kubelet-certificate-authority "$dir/pki/ca.crt" \
    --default-not-ready-toleration-seconds 5 --default-unreachable-toleration-seconds 5 \
    --allow-privileged=true \
    --enable-admission-plugins NamespaceLifecycle,ServiceAccount,DefaultTolerationSeconds,Priority,ResourceQuota \
    --profiling=false \
    --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/logs/audit.log" \
    --audit-log-maxsize 200 \
    >"$dir/logs/kube-apiserver.log" 2>&1 &
  echo $! > "$dir/pids/kube-apiserver"
  kubeconfig "$dir/admin.kubeconfig" "$api_port" "$admin" "$name"
  kubeconfig "$dir/scheduler.kubeconfig" "$api_port" "$scheduler" "$name"
  kubeconfig "$dir/controller-manager.kubeconfig" "$api_port" "$controller" "$name"
  wait_for 60 apiserver curl -sf --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer $admin" \
      "https://127.0.0.1:$api_port/readyz" \
    || { down "$dir"; die "kube-apiserver did not answer /readyz in 60 s; see $dir/logs/kube-apiserver.log"; }

  "$BIN/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" \
    --leader-elect=false --port=0 --secure-port=0 \
    >"$dir/logs/kube-scheduler.log" 2>&1 &
  echo $! > "$dir/pids/kube-scheduler"
  "$BIN/kube-controller-manager" --kubeconfig "$dir/controller-manager.kubeconfig" \
    --leader-elect=false --port=0 --secure-port=0 --use-service-account-credentials=true \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --controllers '*,-bootstrapsigner,-tokencleaner' \
    --node-monitor-grace-period 8s --pod-eviction-timeout 5s --node-monitor-period 2s \
    >"$dir/logs/kube-controller-manager.log" 2>&1 &
  echo $! > "$dir/pids/kube-controller-manager"
  local b
  for b in kube-scheduler kube-controller-manager; do
    sleep 0.2
    alive "$dir/pids/$b" || { down "$dir"; die "$b exited at start; see $dir/logs/$b.log"; }
  done
  # the controller-manager creates the namespace's default ServiceAccount; wait for it so a
  # pod created right away is admitted
  wait_for 30 "default ServiceAccount" curl -sf --cacert "$dir/pki/ca.crt" \
      -H "Authorization: Bearer $admin" \
      "https://127.0.0.1:$api_port/api/v1/namespaces/default/serviceaccounts/default" \
    || { down "$dir"; die "the controller-manager made no default ServiceAccount in 30 s; see $dir/logs"; }
  log "up in $((SECONDS - started)) s on https://127.0.0.1:$api_port ($name)"
  echo "KUBECONFIG=$dir/admin.kubeconfig"
}

stop_one() {  # stop_one PIDFILE: TERM, then KILL after 10 s
  local pidfile=$1 pid
  [[ -f "$pidfile" ]] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

down() {
  local dir=${1:?down: give the folder given to up}
  [[ -d "$dir/pids" ]] || return 0
  # the apiserver before etcd: killed together, the apiserver hangs past 10 s
  local b
  for b in kube-controller-manager kube-scheduler kube-apiserver etcd; do stop_one "$dir/pids/$b"; done
}

case ${1:-} in
  build) build ;;
  up) shift; up "$@" ;;
  down) shift; down "$@" ;;
  built) built ;;
  *) echo "usage: $0 build | up DIR [--name NAME] | down DIR" >&2; exit 2 ;;
esac
