#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, for the kubernetes
# backend's tests and the deploy/ manifests test.
#
#   scripts/k8s.sh build          build (or reuse from the cache) its binaries
#   scripts/k8s.sh up             start it (builds first if needed); idempotent
#   scripts/k8s.sh env            print the exports that point kubectl and tests at it
#   scripts/k8s.sh load IMAGE...  copy images from the private dockerd into it
#   scripts/k8s.sh down           stop it, remove its state, restore every host setting it changed
#
# Kubernetes v1.37.2 is built from the Go module proxy (no release binary
# can be downloaded here): about 13 min cold on 2 cores, cached in
# $EXECBOX_K8S_CACHE (default /var/cache/execbox-test/k8s-v1.37.2) and
# reused while its inputs are the same. etcd, containerd, runc and the CNI
# plugins are Debian's; the gVisor containerd shim is built from the same
# gVisor module as scripts/runsc.sh, and drives that runsc (RuntimeClass
# gvisor); NetworkPolicies are enforced by kube-router's firewall (only
# that part of it, on the node). No registry: images are
# made with the private dockerd (scripts/dockerd.sh, which must run) and
# imported into containerd (load).
#
# Everything runs from $EXECBOX_K8S_STATE (default /var/lib/execbox-test/k8s,
# never a world-writable directory): its own containerd socket and root,
# etcd data, PKI, kubelet root, pod logs. Only processes it started are
# stopped, by their pid files (and the shims of its own containerd, found by
# that containerd's socket path).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

version=v1.37.2
gvisor=${EXECBOX_RUNSC_VERSION:-v0.0.0-20260905035102-160fafc42237}
# NetworkPolicy enforcement: kube-router's firewall alone (iptables and
# ipset). sigs.k8s.io/kube-network-policies needs nftables' queue
# expression, which this kernel lacks (CONFIG_NFT_QUEUE is not set).
kuberouter=v2.1.0
cache=${EXECBOX_K8S_CACHE:-/var/cache/execbox-test/k8s-$version}
K=${EXECBOX_K8S_STATE:-/var/lib/execbox-test/k8s}
export PATH="/usr/local/go/bin:$cache/bin:$PATH"
export KUBECONFIG=$K/pki/admin.kubeconfig

# kubectl is built too: the manifests test applies deploy/ with it, and
# Debian 12 has none that speaks to a 1.37 API server without skew.
components="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"

# The host settings the kubelet, kube-proxy and this script change,
# restored by down.
sysctls="kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom net.ipv4.conf.all.route_localnet net.ipv4.ip_forward"

log() { echo "scripts/k8s.sh: $*" >&2; }

# build: the control plane, kubelet, kube-proxy and kubectl from
# k8s.io/kubernetes, whose staging modules are replaced by their published
# versions; the gVisor shim, patched for Debian's containerd 1.6 and for a
# host without CAP_SYS_RESOURCE; a static pause binary for the pod sandbox
# image.
build() {
	local stamp
	stamp="$version gvisor=$gvisor kube-router=$kuberouter $(go env GOVERSION) $components"
	if [ -f "$cache/stamp" ] && [ "$(cat "$cache/stamp")" = "$stamp" ]; then
		return
	fi
	log "building Kubernetes $version and the gVisor shim into $cache (~13 min cold)"
	local start=$SECONDS
	mkdir -p "$cache/bin" "$cache/src/k8s" "$cache/src/shim"
	(
		cd "$cache/src/k8s"
		go mod download -json "k8s.io/kubernetes@$version" >/dev/null
		local mod c v=k8s.io/component-base/version
		mod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$version.mod
		{
			printf 'module k8sbuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$version"
			awk -v v="v0${version#v1}" '/=> .\/staging/{print "\t"$1" => "$1" "v}' "$mod"
			echo ')'
		} >go.mod
		{
			printf '//go:build tools\n\npackage tools\n\nimport (\n'
			for c in $components; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
			echo ')'
		} >tools.go
		go mod tidy
		for c in $components; do
			[ -x "$cache/bin/$c" ] && continue
			nice -n 10 go build -trimpath -ldflags="-s -w -X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=37" \
				-o "$cache/bin/$c" "k8s.io/kubernetes/cmd/$c"
			log "built $c ($((SECONDS - start)) s)"
		done
	)
	[ -x "$cache/bin/containerd-shim-runsc-v1" ] || (
		cd "$cache/src/shim"
		printf 'module shimbuild\n\ngo 1.26\n\nrequire gvisor.dev/gvisor %s\n' "$gvisor" >go.mod
		printf '//go:build tools\n\npackage tools\n\nimport _ "gvisor.dev/gvisor/shim"\n' >tools.go
		rm -rf vendor
		go mod tidy && go mod vendor && chmod -R u+w vendor
		# containerd 1.6 reads the shim's bare socket address on stdout,
		# not containerd 2's JSON bootstrap parameters.
		sed -i 's#^\t\tdata, err := json.Marshal(&params)#&\n\t\tdata = []byte(params.Address)#' \
			vendor/github.com/containerd/containerd/v2/pkg/shim/shim.go
		grep -q 'data = \[\]byte(params.Address)' vendor/github.com/containerd/containerd/v2/pkg/shim/shim.go
		# Setting its own oom_score_adj needs CAP_SYS_RESOURCE, which this
		# host's bounding set lacks: not fatal.
		sed -i 's#return shim.BootstrapParams{}, fmt.Errorf("failed to set OOM Score on shim: %w", err)#_ = err#' \
			vendor/gvisor.dev/gvisor/pkg/shim/v1/manager.go
		nice -n 10 go build -mod=vendor -trimpath -ldflags='-s -w' -o "$cache/bin/containerd-shim-runsc-v1" gvisor.dev/gvisor/shim
		log "built containerd-shim-runsc-v1 ($((SECONDS - start)) s)"
	)
	[ -x "$cache/bin/kube-router" ] || (
		mkdir -p "$cache/src/kube-router"
		cd "$cache/src/kube-router"
		printf 'module krbuild\n\ngo 1.26\n\nrequire github.com/cloudnativelabs/kube-router/v2 %s\n' "$kuberouter" >go.mod
		printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"\n' >tools.go
		go mod tidy
		CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags='-s -w' -o "$cache/bin/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
		log "built kube-router ($((SECONDS - start)) s)"
	)
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$cache/bin/pause" "$repo/scripts/k8s/pause.go"
	echo "$stamp" >"$cache/stamp"
	log "build done in $((SECONDS - start)) s"
}

ctr() { command ctr --address "$K/containerd/containerd.sock" -n k8s.io "$@"; }

# running NAME: the process in NAME's pid file lives.
running() { [ -f "$K/run/$1.pid" ] && kill -0 "$(cat "$K/run/$1.pid")" 2>/dev/null; }

# daemon NAME CMD...: start CMD in the background, its pid in a file.
daemon() {
	local name=$1
	shift
	running "$name" && return
	nohup "$@" >"$K/logs/$name.log" 2>&1 &
	echo $! >"$K/run/$name.pid"
}

# wait_for NAME SECONDS CMD...: run CMD until it succeeds; NAME's log
# when it does not.
wait_for() {
	local name=$1 secs=$2 i=0
	shift 2
	until "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt $((secs * 5)) ]; then
			log "$name not up after $secs s; its log:"
			tail -20 "$K/logs/$name.log" >&2 || true
			return 1
		fi
		sleep 0.2
	done
}

# node_ip: the address of the default route's interface (the API server's
# advertised address must not be loopback).
node_ip() { ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}'; }

pki() {
	local d=$K/pki node ip
	node=$(hostname)
	ip=$(node_ip)
	[ -f "$d/admin.kubeconfig" ] && return
	mkdir -p "$d"
	(
		cd "$d"
		umask 077
		openssl genrsa -out ca.key 2048 2>/dev/null
		openssl req -x509 -new -nodes -key ca.key -subj "/CN=execbox-test-ca" -days 3650 -out ca.crt 2>/dev/null
		sign() { # name subject [san]
			openssl genrsa -out "$1.key" 2048 2>/dev/null
			openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
			printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' >"$1.ext"
			[ -z "${3:-}" ] || echo "subjectAltName=$3" >>"$1.ext"
			openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
		}
		sign apiserver "/CN=kube-apiserver" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:$node,IP:127.0.0.1,IP:10.96.0.1,IP:$ip"
		sign admin "/O=system:masters/CN=admin"
		sign kubelet "/O=system:nodes/CN=system:node:$node" "DNS:$node,DNS:localhost,IP:127.0.0.1,IP:$ip"
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
		for u in admin kubelet; do
			printf '%s\n' "apiVersion: v1" "kind: Config" "clusters:" "- name: local" \
				"  cluster: {server: \"https://127.0.0.1:6443\", certificate-authority: \"$d/ca.crt\"}" \
				"users:" "- name: $u" "  user: {client-certificate: \"$d/$u.crt\", client-key: \"$d/$u.key\"}" \
				"contexts:" "- name: local" "  context: {cluster: local, user: $u}" "current-context: local" >"$u.kubeconfig"
		done
	)
}

up() {
	build
	local runsc p=$K/pki ip
	runsc=$(./scripts/runsc.sh)
	local c missing=
	for c in etcd containerd runc ipset iptables openssl curl; do command -v $c >/dev/null || missing=1; done
	if [ -n "$missing" ] || [ ! -x /usr/lib/cni/bridge ]; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			etcd-server containerd runc containernetworking-plugins openssl iptables ipset curl >/dev/null
	fi
	mkdir -p "$K"/{run,logs,containerd,cni/net.d,kubelet,podlogs}
	chmod 700 "$K"
	if [ ! -f "$K/run/sysctl.orig" ]; then
		for k in $sysctls; do
			v=$(sysctl -n "$k" 2>/dev/null) && echo "$k=$v"
		done >"$K/run/sysctl.orig"
	fi
	sysctl -qw net.ipv4.ip_forward=1
	pki
	ip=$(node_ip)

	printf '%s\n' \
		'version = 2' \
		"root = \"$K/containerd/root\"" \
		"state = \"$K/containerd/state\"" \
		'[grpc]' \
		"  address = \"$K/containerd/containerd.sock\"" \
		'[ttrpc]' \
		"  address = \"$K/containerd/containerd.sock.ttrpc\"" \
		'[plugins."io.containerd.grpc.v1.cri"]' \
		'  sandbox_image = "registry.local/pause:1.0"' \
		'  # No CAP_SYS_RESOURCE here: runc cannot set oom_score_adj -998.' \
		'  restrict_oom_score_adj = true' \
		'  [plugins."io.containerd.grpc.v1.cri".containerd]' \
		'    snapshotter = "overlayfs"' \
		'    default_runtime_name = "runc"' \
		'    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]' \
		'      runtime_type = "io.containerd.runc.v2"' \
		'      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]' \
		'        SystemdCgroup = false' \
		"        Root = \"$K/containerd/runc-root\"" \
		'    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]' \
		'      runtime_type = "io.containerd.runsc.v1"' \
		'      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]' \
		'        TypeUrl = "io.containerd.runsc.v1.options"' \
		"        ConfigPath = \"$K/containerd/runsc.toml\"" \
		'  [plugins."io.containerd.grpc.v1.cri".cni]' \
		'    bin_dir = "/usr/lib/cni"' \
		"    conf_dir = \"$K/cni/net.d\"" >"$K/containerd/config.toml"
	printf '%s\n' "binary_name = \"$runsc\"" "root = \"$K/containerd/runsc-root\"" \
		'[runsc_config]' '  network = "sandbox"' >"$K/containerd/runsc.toml"
	printf '%s\n' '{"cniVersion": "1.0.0", "name": "execbox-test", "plugins": [' \
		'  {"type": "bridge", "bridge": "execbox-k8s0", "isGateway": true, "ipMasq": true,' \
		"   \"ipam\": {\"type\": \"host-local\", \"ranges\": [[{\"subnet\": \"10.244.0.0/24\"}]], \"routes\": [{\"dst\": \"0.0.0.0/0\"}], \"dataDir\": \"$K/cni/ipam\"}}," \
		'  {"type": "portmap", "capabilities": {"portMappings": true}},' \
		'  {"type": "firewall"}]}' >"$K/cni/net.d/10-execbox.conflist"
	# containerd finds the gVisor shim (containerd-shim-runsc-v1) in PATH.
	daemon containerd containerd --config "$K/containerd/config.toml"
	wait_for containerd 30 ctr version
	# The pod sandbox image, made with the private dockerd (scripts/dockerd.sh)
	# from the static pause binary.
	tar -C "$cache/bin" -c pause | docker import -c 'ENTRYPOINT ["/pause"]' - registry.local/pause:1.0 >/dev/null
	load registry.local/pause:1.0

	daemon etcd etcd --name execbox-test --data-dir "$K/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster execbox-test=http://127.0.0.1:2380
	wait_for etcd 30 curl -sf http://127.0.0.1:2379/health

	daemon apiserver "$cache/bin/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 --advertise-address="$ip" \
		--secure-port=6443 --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
		--client-ca-file="$p/ca.crt" --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--api-audiences=https://kubernetes.default.svc.cluster.local --service-cluster-ip-range=10.96.0.0/16 \
		--authorization-mode=Node,RBAC --allow-privileged=true \
		--kubelet-client-certificate="$p/admin.crt" --kubelet-client-key="$p/admin.key" \
		--enable-admission-plugins=NodeRestriction
	wait_for apiserver 120 kubectl get --raw /readyz
	daemon controller-manager "$cache/bin/kube-controller-manager" --kubeconfig="$p/admin.kubeconfig" \
		--authentication-kubeconfig="$p/admin.kubeconfig" --authorization-kubeconfig="$p/admin.kubeconfig" \
		--service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
		--cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" \
		--use-service-account-credentials=true --leader-elect=false --service-cluster-ip-range=10.96.0.0/16
	daemon scheduler "$cache/bin/kube-scheduler" --kubeconfig="$p/admin.kubeconfig" \
		--authentication-kubeconfig="$p/admin.kubeconfig" --authorization-kubeconfig="$p/admin.kubeconfig" --leader-elect=false

	# cgroup v1 here needs failCgroupV1: false (kubelet 1.35+). The pods'
	# logs stay under $K, not in /var/log.
	printf '%s\n' \
		'apiVersion: kubelet.config.k8s.io/v1beta1' \
		'kind: KubeletConfiguration' \
		'failCgroupV1: false' \
		'cgroupDriver: cgroupfs' \
		"containerRuntimeEndpoint: unix://$K/containerd/containerd.sock" \
		"authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $p/ca.crt}}" \
		'authorization: {mode: Webhook}' \
		"tlsCertFile: $p/kubelet.crt" \
		"tlsPrivateKeyFile: $p/kubelet.key" \
		'clusterDomain: cluster.local' \
		'failSwapOn: false' \
		'resolvConf: /etc/resolv.conf' \
		"podLogsDir: $K/podlogs" \
		'podPidsLimit: 4096' \
		'evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}' \
		'imageGCHighThresholdPercent: 100' \
		'imageGCLowThresholdPercent: 99' >"$K/kubelet-config.yaml"
	daemon kubelet "$cache/bin/kubelet" --config="$K/kubelet-config.yaml" --kubeconfig="$p/kubelet.kubeconfig" \
		--root-dir="$K/kubelet" --hostname-override="$(hostname)"
	daemon kube-proxy "$cache/bin/kube-proxy" --kubeconfig="$p/admin.kubeconfig" --hostname-override="$(hostname)" \
		--proxy-mode=iptables --cluster-cidr=10.244.0.0/24 --conntrack-max-per-core=0
	wait_for kubelet 120 kubectl wait --for=condition=Ready "node/$(hostname)" --timeout=5s
	wait_for controller-manager 60 kubectl get serviceaccount default
	printf '%s\n' 'apiVersion: node.k8s.io/v1' 'kind: RuntimeClass' 'metadata: {name: gvisor}' 'handler: runsc' |
		kubectl apply -f - >/dev/null
	# NetworkPolicies are enforced (the bridge CNI plugin does not), by
	# kube-router's firewall on the node; routes and Services stay the
	# bridge's and kube-proxy's.
	daemon kube-router "$cache/bin/kube-router" --kubeconfig="$p/admin.kubeconfig" --run-firewall=true \
		--run-router=false --run-service-proxy=false --enable-cni=false --hostname-override="$(hostname)" --health-port=0
	wait_for kube-router 30 sh -c 'iptables -S | grep -q KUBE-ROUTER'
	log "cluster up: node $(hostname) Ready, API server https://127.0.0.1:6443"
}

# load IMAGE...: copy images from the engine at DOCKER_HOST (the private
# dockerd) into containerd.
load() {
	local img
	for img in "$@"; do
		docker save "$img" | ctr images import - >/dev/null
	done
}

# stop NAME: the process in NAME's pid file, TERM then KILL.
stop() {
	local pid
	[ -f "$K/run/$1.pid" ] || return 0
	pid=$(cat "$K/run/$1.pid")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$K/run/$1.pid"
}

down() {
	[ -d "$K/run" ] || return 0
	if running apiserver && running kubelet; then
		kubectl delete pods --all --all-namespaces --grace-period=1 --timeout=30s >/dev/null 2>&1 || true
	fi
	stop kubelet
	stop kube-proxy
	stop kube-router
	# What our containerd still runs: its tasks, then its shims (found by
	# our socket's path on their command line, stopped by PID).
	if running containerd; then
		for id in $(ctr tasks ls -q 2>/dev/null); do ctr tasks kill -s KILL "$id" 2>/dev/null || true; done
	fi
	for pid in $(pgrep -f -- "-address $K/containerd/containerd.sock" || true); do kill -9 "$pid" 2>/dev/null || true; done
	stop containerd
	stop scheduler
	stop controller-manager
	stop apiserver
	stop etcd
	grep -E " ($K/|/run/netns/cni-)" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	for n in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do ip netns delete "$n" 2>/dev/null || true; done
	ip link delete execbox-k8s0 2>/dev/null || true
	# The chains the kubelet, kube-proxy and the CNI plugins made.
	local ipt t ch n c
	for ipt in iptables ip6tables; do
		for t in filter nat mangle; do
			for ch in INPUT OUTPUT FORWARD PREROUTING POSTROUTING; do
				for n in $($ipt -t $t -L $ch --line-numbers -n 2>/dev/null | awk '$2 ~ /^(KUBE|CNI)-/{print $1}' | sort -rn); do
					$ipt -t $t -D $ch "$n" || true
				done
			done
			for c in $($ipt -t $t -S 2>/dev/null | awk '/^-N (KUBE|CNI)-/{print $2}'); do $ipt -t $t -F "$c" || true; done
			for c in $($ipt -t $t -S 2>/dev/null | awk '/^-N (KUBE|CNI)-/{print $2}'); do $ipt -t $t -X "$c" || true; done
		done
	done
	# kube-router's ipsets, once no rule uses them.
	for c in $(ipset list -n 2>/dev/null | grep '^KUBE-' || true); do ipset destroy "$c" 2>/dev/null || true; done
	for h in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods; do
		[ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
	if [ -f "$K/run/sysctl.orig" ]; then
		while read -r kv; do sysctl -qw "$kv" || true; done <"$K/run/sysctl.orig"
	fi
	# The state goes; the built binaries stay in the cache.
	rm -rf "$K"
	log "cluster down, host settings restored"
}

case "${1:-}" in
build) build ;;
up) up ;;
down) down ;;
load)
	shift
	load "$@"
	;;
env) echo "export KUBECONFIG=$KUBECONFIG PATH=$cache/bin:\$PATH" ;;
*)
	sed -n '2,/^set -e/p' "$0" | sed '$d' >&2
	exit 2
	;;
esac
