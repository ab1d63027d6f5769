package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hyperfleet/hyperfleet/cmd/hyperfleet-dev/internal/supervisor"
)

// The management clusters `up` runs, by the names the seed registers them under (docs/management-clusters.md): a
// kube-apiserver with HyperShift's CRDs and a hypershift-sim each, started together from the same kube assets.
const (
	mcA = "mc-a"
	mcB = "mc-b"
	// dirManagementClusters is the dev dir's directory of their kubeconfigs, one file per management cluster named
	// as its credentials.kubeconfig: the applier's --management-cluster-credentials.
	dirManagementClusters = "management-clusters"
)

// defaultMaxHostedClusters are the seeded management clusters' capacity: small enough that a fourth cluster of
// the walk-through waits with NoCapacity.
func defaultMaxHostedClusters() map[string]int { return map[string]int{mcA: 2, mcB: 1} }

// devManagementCluster is one local management cluster: its listeners and the capacity the seed gives it.
type devManagementCluster struct {
	name                               string
	kubeAddr, etcdAddr, hypershiftAddr string
	maxHostedClusters                  int
}

// managementClusters returns the local management clusters in name order.
func (s *stack) managementClusters() []devManagementCluster {
	return []devManagementCluster{
		{name: mcA, kubeAddr: s.cfg.kubeAddr, etcdAddr: s.cfg.etcdAddr, hypershiftAddr: s.cfg.hypershiftAddr,
			maxHostedClusters: s.cfg.maxHostedClusters[mcA]},
		{name: mcB, kubeAddr: s.cfg.mcBKubeAddr, etcdAddr: s.cfg.mcBEtcdAddr, hypershiftAddr: s.cfg.mcBHypershiftAddr,
			maxHostedClusters: s.cfg.maxHostedClusters[mcB]},
	}
}

// checkMaxHostedClusters refuses a capacity for a management cluster `up` does not run, or below 1 (the API's
// minimum).
func checkMaxHostedClusters(capacity map[string]int) error {
	for name, n := range capacity {
		if name != mcA && name != mcB {
			return fmt.Errorf("--max-hosted-clusters %s=%d: the management clusters are %s and %s", name, n, mcA, mcB)
		}
		if n < 1 {
			return fmt.Errorf("--max-hosted-clusters %s=%d: at least 1", name, n)
		}
	}
	for _, name := range []string{mcA, mcB} {
		if _, ok := capacity[name]; !ok {
			return fmt.Errorf("--max-hosted-clusters: no capacity for %s", name)
		}
	}
	return nil
}

// credentialsDir is the applier's --management-cluster-credentials.
func (s *stack) credentialsDir() string { return s.dev(dirManagementClusters) }

// kubeconfig is the kubeconfig of a management cluster, written by its kube component once it is ready.
func (s *stack) kubeconfig(mc string) string { return filepath.Join(s.credentialsDir(), mc) }

// kubeComponent and hypershiftComponent name a management cluster's components.
func kubeComponent(mc string) string { return compKube + "-" + mc }

func hypershiftComponent(mc string) string { return compHyperShift + "-" + mc }

// kubeComponents are every management cluster's kube component.
func (s *stack) kubeComponents() []string {
	var out []string
	for _, mc := range s.managementClusters() {
		out = append(out, kubeComponent(mc.name))
	}
	return out
}

// managementClusterSpecs are each management cluster's kube-apiserver and hypershift-sim. The kube components
// depend on nothing but the kube assets, so the supervisor starts them at once: two take as long as one.
func (s *stack) managementClusterSpecs(kubeDeps []string) []supervisor.Spec {
	var specs []supervisor.Spec
	for _, mc := range s.managementClusters() {
		kubeconfig := s.kubeconfig(mc.name)
		kube := kubeComponent(mc.name)
		specs = append(specs, supervisor.Spec{
			Name: kube, Command: s.self, DependsOn: slices.Clone(kubeDeps),
			Args: []string{"kube", "--assets", s.cfg.kubeAssets, "--data-dir", s.dev(filepath.Join("kube", mc.name, "etcd")),
				"--cert-dir", s.dev(filepath.Join("kube", mc.name, "certs")), "--kubeconfig-out", kubeconfig,
				"--namespace", s.cfg.namespace, "--listen", mc.kubeAddr, "--etcd-listen", mc.etcdAddr},
			// The kubeconfig of the previous run names certificates that are gone; kube writes a new one when ready.
			Before:      func() error { return removeIfExists(kubeconfig) },
			Ready:       kubeProbe(kubeconfig),
			StopTimeout: max(s.cfg.stopTimeout, 30*time.Second), StartTimeout: 3 * time.Minute,
		}, supervisor.Spec{
			Name: hypershiftComponent(mc.name), Command: s.bin(compHyperShift),
			Args: []string{"--kubeconfig", kubeconfig, "--namespace", s.cfg.namespace, "--delay", s.cfg.hypershiftDelay.String(),
				"--health-bind-address", mc.hypershiftAddr},
			DependsOn: []string{kube}, RestartWith: []string{kube},
			Ready:  supervisor.HTTPProbe(nil, "http://"+mc.hypershiftAddr+"/readyz"),
			Health: supervisor.HTTPProbe(nil, "http://"+mc.hypershiftAddr+"/healthz"),
		})
	}
	return specs
}

// formatCapacity says each management cluster's capacity, for the banner: "mc-a (room for 2), mc-b (room for 1)".
func (s *stack) formatCapacity() string {
	var parts []string
	for _, mc := range s.managementClusters() {
		parts = append(parts, fmt.Sprintf("%s (room for %d)", mc.name, mc.maxHostedClusters))
	}
	return strings.Join(parts, ", ")
}
