// Package hypershiftcrd holds HyperShift's HostedCluster and NodePool CustomResourceDefinitions (the Default
// feature set, from the public openshift/hypershift repository; see crds/README.md for the source and
// licence) and installs them, for the kube-apiservers of tests and of development.
package hypershiftcrd

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// crdFiles holds the HyperShift CRDs; see crds/README.md for their source and licence. They are embedded so
// that tests and the development stack need nothing from outside the clone but the Kubernetes binaries.
//
//go:embed crds/hostedclusters.crd.yaml crds/nodepools.crd.yaml
var crdFiles embed.FS

// crdFileNames lists the embedded CRDs in installation order.
func crdFileNames() []string {
	return []string{"crds/hostedclusters.crd.yaml", "crds/nodepools.crd.yaml"}
}

// Install creates (or updates) the embedded CRDs with server-side apply (a client-side apply would need a last-applied
// annotation larger than the 256 KiB the API allows) and waits until each is established, its names accepted,
// and its resource served, the point from which requests for it succeed.
func Install(ctx context.Context, dyn dynamic.Interface, fieldManager string) error {
	crds := dyn.Resource(schema.GroupVersionResource{
		Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
	})
	var installed []*unstructured.Unstructured
	for _, name := range crdFileNames() {
		raw, err := crdFiles.ReadFile(name)
		if err != nil {
			return err
		}
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &crd.Object); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		data, err := crd.MarshalJSON()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if _, err := crds.Patch(ctx, crd.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: fieldManager, Force: new(true)}); err != nil {
			return fmt.Errorf("applying %s: %w", crd.GetName(), err)
		}
		installed = append(installed, crd)
	}
	for _, crd := range installed {
		if err := waitEstablished(ctx, crds, crd.GetName()); err != nil {
			return err
		}
		if err := waitServed(ctx, dyn, crd); err != nil {
			return err
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, crds dynamic.ResourceInterface, name string) error {
	return poll(ctx, name+" established", func(ctx context.Context) error {
		got, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var status struct {
			Conditions []metav1.Condition `json:"conditions"`
		}
		if raw, ok := got.Object["status"].(map[string]any); ok {
			if err := fromMap(raw, &status); err != nil {
				return err
			}
		}
		for _, c := range []string{"Established", "NamesAccepted"} {
			if !meta.IsStatusConditionTrue(status.Conditions, c) {
				return fmt.Errorf("condition %s is not True", c)
			}
		}
		return nil
	})
}

// waitServed waits until a list of crd's resource succeeds in every served version: Established can come a moment
// before the handlers for the new resource are in place.
func waitServed(ctx context.Context, dyn dynamic.Interface, crd *unstructured.Unstructured) error {
	var spec struct {
		Group string `json:"group"`
		Names struct {
			Plural string `json:"plural"`
		} `json:"names"`
		Versions []struct {
			Name   string `json:"name"`
			Served bool   `json:"served"`
		} `json:"versions"`
	}
	raw, _ := crd.Object["spec"].(map[string]any)
	if err := fromMap(raw, &spec); err != nil {
		return fmt.Errorf("%s: %w", crd.GetName(), err)
	}
	for _, v := range spec.Versions {
		if !v.Served {
			continue
		}
		gvr := schema.GroupVersionResource{Group: spec.Group, Version: v.Name, Resource: spec.Names.Plural}
		if err := poll(ctx, gvr.String()+" served", func(ctx context.Context) error {
			_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// poll calls check until it returns nil or ctx ends; the error then says what was awaited and check's last word.
func poll(ctx context.Context, what string, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, errors.Join(err, last))
	}
	return nil
}

func fromMap(m map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}
