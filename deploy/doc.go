// Package deploy is execbox's service packaging: what an operator who has
// never seen the source installs. It holds no code that execbox links; its
// files are shipped as they are:
//
//	execbox.yaml      the default configuration: every key with its default
//	                  (commented out) and what the packaging sets
//	execbox.service   the systemd unit: hardened so that every backend works,
//	                  graceful stop
//	deploy.sh         install/start/stop/restart/status/logs/upgrade/
//	                  rollback/uninstall of a release bundle, systemd or
//	                  docker mode
//	README.md         the bundle's operator guide
//	image/            the container image's entrypoint and healthcheck
//	mkimage/          the offline image builder (docker load archive)
//	nfpm.yaml,        the Debian package (built by nfpm, a build tool run
//	debian/           from the module proxy) and its maintainer scripts
//	kubernetes/       kustomize: base/ (execbox serve as a Deployment whose
//	                  sandboxes are Pods: the kubernetes backend) and
//	                  node-local/ (a DaemonSet with the native backend);
//	                  TestKubernetesManifests applies the base to a real
//	                  cluster (scripts/k8s.sh)
//
// scripts/release.sh builds the bundles, the image and the .deb;
// scripts/test-release.sh installs, upgrades, rolls back and removes them.
//
// Invariants, kept by this package's tests:
//   - execbox.yaml lists every configuration key exactly once; with every
//     "#key: value" line uncommented it still loads, and each such value is
//     the built-in default. The keys it sets are the ones the packaging
//     decides (directories, audit log, listen address, graceful stop).
//   - The unit runs `execbox serve --config /etc/execbox/execbox.yaml`, its
//     state and runtime directories are execbox.yaml's, and it waits longer
//     on stop than the drain and shutdown timeouts together.
package deploy
