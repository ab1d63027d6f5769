package kubeenv

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// HostedClusters returns the resource of HyperShift's HostedCluster in the version the CRD serves and stores.
func HostedClusters() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "hypershift.openshift.io", Version: "v1beta1", Resource: "hostedclusters"}
}

// NodePools returns the resource of HyperShift's NodePool in the version the CRD serves and stores.
func NodePools() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "hypershift.openshift.io", Version: "v1beta1", Resource: "nodepools"}
}

// HostedCluster returns the smallest HostedCluster in namespace/name that the Default-feature-set CRD accepts,
// with spec.release.image set to image, as a starting point for tests that need one. The CRD requires spec.etcd,
// networking, platform, pullSecret, release and services; etcd (managed, 8Gi PersistentVolume) and networking
// (OVNKubernetes, 10.132.0.0/14, 172.31.0.0/16) have defaults, so they are left out. platform None needs no
// platform block, and services must name at least four services, each with a publishing strategy.
//
// Each call returns a new object that the caller may change.
func HostedCluster(namespace, name, image string) *unstructured.Unstructured {
	nodePort := func(service string) map[string]any {
		return map[string]any{
			"service": service,
			"servicePublishingStrategy": map[string]any{
				"type":     "NodePort",
				"nodePort": map[string]any{"address": "api." + name + ".example.com"},
			},
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hypershift.openshift.io/v1beta1",
		"kind":       "HostedCluster",
		"metadata":   map[string]any{"namespace": namespace, "name": name},
		"spec": map[string]any{
			"release":    map[string]any{"image": image},
			"pullSecret": map[string]any{"name": name + "-pull-secret"},
			"platform":   map[string]any{"type": "None"},
			"services": []any{
				nodePort("APIServer"), nodePort("OAuthServer"), nodePort("Konnectivity"), nodePort("Ignition"),
			},
		},
	}}
}
