package hostedcluster

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Labels and annotations the applier puts on what it creates. The cluster-id label is how it recognises its own
// objects: it never changes an object that carries another cluster's id, or none.
const (
	LabelClusterID   = "hyperfleet.io/cluster-id"
	LabelClusterName = "hyperfleet.io/cluster-name"
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	managedByValue   = "hyperfleet"
	// AnnotationAppliedHash holds a hash of what the applier last applied to the object: when the object it
	// would apply now has the same hash, it applies nothing (no write, resourceVersion unchanged).
	AnnotationAppliedHash = "hyperfleet.io/applied-hash"
	// AnnotationGeneration is the cluster generation the object was last applied for.
	AnnotationGeneration = "hyperfleet.io/cluster-generation"
	// AnnotationReleaseVersion is the OpenShift version of the applied release image, as the VersionStream resolved
	// it, for operators (and for hypershift-sim, which cannot read it from the payload).
	AnnotationReleaseVersion = "hyperfleet.io/release-version"
	// AnnotationSpecHash holds a hash of the cluster's hosted_cluster spec the HostedCluster was built from: when
	// it is unchanged but the built object is not, the change is the applier's own (a new version, pull secret or
	// default) and its re-apply is paced; a user's spec change is not.
	AnnotationSpecHash = "hyperfleet.io/spec-hash"
	// LabelRecreate, on a cluster in the API, asks the applier to re-create a HostedCluster that is missing
	// (ReasonHostedClusterMissing): any value other than the one it last saw (DataRecreateToken) is a request.
	LabelRecreate = "hyperfleet.io/recreate"
)

// Keys of the Secrets the HostedCluster names.
const (
	pullSecretKey = ".dockerconfigjson" //nolint:gosec // a key name, not a credential
	sshKeyKey     = "id_rsa.pub"
)

// Desired is everything the objects of one cluster are built from.
type Desired struct {
	ClusterID    string // the cluster's UUID: the HostedCluster's clusterID and the cluster-id label
	Name         string // the cluster's name, which names the HostedCluster
	Namespace    string
	Generation   int64
	Spec         api.HostedClusterSpec
	ReleaseImage string
	// ReleaseVersion is ReleaseImage's version, when known.
	ReleaseVersion string
	PullSecret     []byte // the pull secret file's content
}

// Objects are what the applier applies for one cluster: the Secrets first, since the HostedCluster names them.
type Objects struct {
	Secrets       []*unstructured.Unstructured
	HostedCluster *unstructured.Unstructured
}

// PullSecretName returns the name of the cluster's pull-secret Secret: from the cluster's id, which no user
// chooses, so that a Secret in the shared namespace can be neither squatted before the cluster exists nor left
// behind by a rename. The spec's pull_secret_name is not used; Secrets the applier named by it (or by the
// cluster's name) before are deleted once the HostedCluster names the new ones (see pruneSecrets).
func (d *Desired) PullSecretName() string { return d.ClusterID + "-pull-secret" }

// SSHKeyName returns the name of the Secret holding the cluster's SSH key, from the cluster's id too.
func (d *Desired) SSHKeyName() string { return d.ClusterID + "-ssh-key" }

// Build returns the HostedCluster and Secrets for d, each with the applied-hash annotation set. It is pure: the
// same Desired gives the same objects, byte for byte once encoded.
func Build(d *Desired) (*Objects, error) {
	out := &Objects{}
	out.Secrets = append(out.Secrets, secret(d, d.PullSecretName(), "kubernetes.io/dockerconfigjson", pullSecretKey, d.PullSecret))
	if key := deref(d.Spec.SshPublicKey); key != "" {
		out.Secrets = append(out.Secrets, secret(d, d.SSHKeyName(), "Opaque", sshKeyKey, []byte(key)))
	}
	hc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hypershift.openshift.io/v1beta1",
		"kind":       "HostedCluster",
		"metadata":   metadata(d, d.Name),
		"spec":       hostedClusterSpec(d),
	}}
	annotations := hc.GetAnnotations()
	if d.ReleaseVersion != "" {
		annotations[AnnotationReleaseVersion] = d.ReleaseVersion
	}
	specHash, err := hashOf(d.Spec)
	if err != nil {
		return nil, fmt.Errorf("hash the spec of %s: %w", d.Name, err)
	}
	annotations[AnnotationSpecHash] = specHash
	hc.SetAnnotations(annotations)
	out.HostedCluster = hc
	for _, obj := range append(slices.Clone(out.Secrets), hc) {
		if err := stampHash(obj); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func metadata(d *Desired, name string) map[string]any {
	return map[string]any{
		"name":      name,
		"namespace": d.Namespace,
		"labels": map[string]any{
			LabelClusterID:   d.ClusterID,
			LabelClusterName: d.Name,
			LabelManagedBy:   managedByValue,
		},
		"annotations": map[string]any{AnnotationGeneration: strconv.FormatInt(d.Generation, 10)},
	}
}

func secret(d *Desired, name, typ, key string, value []byte) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata":   metadata(d, name),
		"type":       typ,
		"data":       map[string]any{key: base64.StdEncoding.EncodeToString(value)},
	}}
}

// stampHash sets the applied-hash annotation to a hash of the object as it is without its annotations but the
// spec hash. The generation annotation is left out: a new generation that changes nothing on the object needs no
// write. The spec hash is kept in: a changed hosted_cluster spec is written even when it builds the same object, so
// the annotation always tells the last applied spec and a later change of the applier's own is recognised as such.
func stampHash(obj *unstructured.Unstructured) error {
	annotations := obj.GetAnnotations()
	hashed := obj.DeepCopy()
	hashed.SetAnnotations(nil)
	if spec, ok := annotations[AnnotationSpecHash]; ok {
		hashed.SetAnnotations(map[string]string{AnnotationSpecHash: spec})
	}
	sum, err := hashOf(hashed.Object)
	if err != nil {
		return fmt.Errorf("hash %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	annotations[AnnotationAppliedHash] = sum
	obj.SetAnnotations(annotations)
	return nil
}

// hashOf is a short hash of v's JSON; encoding/json sorts map keys: the same value, the same bytes.
func hashOf(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:12]), nil
}

// hostedClusterSpec maps the API's snake_case subset onto HyperShift's HostedClusterSpec.
func hostedClusterSpec(d *Desired) map[string]any {
	s := &d.Spec
	spec := map[string]any{
		"release":    map[string]any{"image": d.ReleaseImage},
		"clusterID":  d.ClusterID,
		"pullSecret": map[string]any{"name": d.PullSecretName()},
		"platform":   platform(s.Platform),
		"networking": networking(s.Networking),
		"etcd":       etcd(s.Etcd),
		"services":   services(s.Services),
	}
	if deref(s.SshPublicKey) != "" {
		spec["sshKey"] = map[string]any{"name": d.SSHKeyName()}
	}
	if s.Dns != nil {
		dns := map[string]any{}
		setString(dns, "baseDomain", s.Dns.BaseDomain)
		setString(dns, "publicZoneID", s.Dns.PublicZoneId)
		setString(dns, "privateZoneID", s.Dns.PrivateZoneId)
		if len(dns) > 0 {
			spec["dns"] = dns
		}
	}
	setString(spec, "issuerURL", s.IssuerUrl)
	setString(spec, "infraID", s.InfraId)
	if s.Fips != nil {
		spec["fips"] = *s.Fips
	}
	if s.ControllerAvailabilityPolicy != nil {
		spec["controllerAvailabilityPolicy"] = string(*s.ControllerAvailabilityPolicy)
	}
	if s.InfrastructureAvailabilityPolicy != nil {
		spec["infrastructureAvailabilityPolicy"] = string(*s.InfrastructureAvailabilityPolicy)
	}
	if s.NodeSelector != nil && len(*s.NodeSelector) > 0 {
		selector := map[string]any{}
		for k, v := range *s.NodeSelector {
			selector[k] = v
		}
		spec["nodeSelector"] = selector
	}
	if s.Tolerations != nil && len(*s.Tolerations) > 0 {
		spec["tolerations"] = tolerations(*s.Tolerations)
	}
	if c := configuration(s.Configuration); len(c) > 0 {
		spec["configuration"] = c
	}
	return spec
}

func platform(p *api.HostedClusterPlatform) map[string]any {
	if p == nil {
		return map[string]any{"type": "None"}
	}
	out := map[string]any{"type": string(p.Type)}
	if p.Agent != nil {
		out["agent"] = map[string]any{"agentNamespace": p.Agent.AgentNamespace}
	}
	if p.Kubevirt != nil {
		kv := map[string]any{}
		if p.Kubevirt.BaseDomainPassthrough != nil {
			kv["baseDomainPassthrough"] = *p.Kubevirt.BaseDomainPassthrough
		}
		out["kubevirt"] = kv
	}
	return out
}

// networking fills what the API's defaults would have, so that a spec stored before a default existed still builds.
func networking(n *api.HostedClusterNetworking) map[string]any {
	out := map[string]any{
		"networkType":    "OVNKubernetes",
		"clusterNetwork": []any{map[string]any{"cidr": "10.132.0.0/14"}},
		"serviceNetwork": []any{map[string]any{"cidr": "172.31.0.0/16"}},
	}
	if n == nil {
		return out
	}
	if n.NetworkType != nil {
		out["networkType"] = string(*n.NetworkType)
	}
	if n.ClusterNetwork != nil {
		entries := make([]any, len(*n.ClusterNetwork))
		for i, e := range *n.ClusterNetwork {
			entry := map[string]any{"cidr": e.Cidr}
			if e.HostPrefix != nil {
				entry["hostPrefix"] = int64(*e.HostPrefix)
			}
			entries[i] = entry
		}
		out["clusterNetwork"] = entries
	}
	if n.ServiceNetwork != nil {
		entries := make([]any, len(*n.ServiceNetwork))
		for i, e := range *n.ServiceNetwork {
			entries[i] = map[string]any{"cidr": e.Cidr}
		}
		out["serviceNetwork"] = entries
	}
	if n.MachineNetwork != nil && len(*n.MachineNetwork) > 0 {
		entries := make([]any, len(*n.MachineNetwork))
		for i, e := range *n.MachineNetwork {
			entries[i] = map[string]any{"cidr": e.Cidr}
		}
		out["machineNetwork"] = entries
	}
	return out
}

func etcd(e *api.HostedClusterEtcd) map[string]any {
	volume := map[string]any{"size": "8Gi"}
	if e != nil {
		if e.StorageSize != nil {
			volume["size"] = *e.StorageSize
		}
		setString(volume, "storageClassName", e.StorageClassName)
	}
	return map[string]any{
		"managementType": "Managed",
		"managed": map[string]any{"storage": map[string]any{
			"type":             "PersistentVolume",
			"persistentVolume": volume,
		}},
	}
}

// defaultServices are the API's default, for a spec stored without them.
func defaultServices() []api.HostedClusterService {
	out := make([]api.HostedClusterService, 0, 4)
	for _, name := range []api.ClusterSpecHostedClusterServicesService{api.ClusterSpecHostedClusterServicesServiceAPIServer, api.ClusterSpecHostedClusterServicesServiceOAuthServer,
		api.ClusterSpecHostedClusterServicesServiceKonnectivity, api.ClusterSpecHostedClusterServicesServiceIgnition} {
		out = append(out, api.HostedClusterService{Service: name, Type: api.ClusterSpecHostedClusterServicesTypeRoute})
	}
	return out
}

func services(in *[]api.HostedClusterService) []any {
	list := defaultServices()
	if in != nil && len(*in) > 0 {
		list = *in
	}
	out := make([]any, len(list))
	for i := range list {
		svc := &list[i]
		strategy := map[string]any{"type": string(svc.Type)}
		switch svc.Type {
		case api.ClusterSpecHostedClusterServicesTypeNodePort:
			nodePort := map[string]any{"address": deref(svc.Address)}
			if svc.Port != nil {
				nodePort["port"] = int64(*svc.Port)
			}
			strategy["nodePort"] = nodePort
		case api.ClusterSpecHostedClusterServicesTypeRoute:
			if svc.Hostname != nil {
				strategy["route"] = map[string]any{"hostname": *svc.Hostname}
			}
		case api.ClusterSpecHostedClusterServicesTypeLoadBalancer:
			if svc.Hostname != nil {
				strategy["loadBalancer"] = map[string]any{"hostname": *svc.Hostname}
			}
		}
		out[i] = map[string]any{"service": string(svc.Service), "servicePublishingStrategy": strategy}
	}
	return out
}

func tolerations(in []api.HostedClusterToleration) []any {
	out := make([]any, len(in))
	for i := range in {
		t := &in[i]
		entry := map[string]any{}
		setString(entry, "key", t.Key)
		setString(entry, "value", t.Value)
		if t.Operator != nil {
			entry["operator"] = string(*t.Operator)
		}
		if t.Effect != nil {
			entry["effect"] = string(*t.Effect)
		}
		if t.TolerationSeconds != nil {
			entry["tolerationSeconds"] = *t.TolerationSeconds
		}
		out[i] = entry
	}
	return out
}

// configuration passes the user's configuration through under HyperShift's keys, deep-copied so that the built
// object shares nothing with the decoded spec.
func configuration(c *api.HostedClusterConfiguration) map[string]any {
	if c == nil {
		return nil
	}
	out := map[string]any{}
	for key, value := range map[string]*map[string]any{
		"apiServer": c.ApiServer, "authentication": c.Authentication, "image": c.Image,
		"ingress": c.Ingress, "oauth": c.Oauth, "proxy": c.Proxy, "scheduler": c.Scheduler,
	} {
		if value != nil {
			out[key] = runtime.DeepCopyJSONValue(*value)
		}
	}
	return out
}

func setString(m map[string]any, key string, value *string) {
	if value != nil && *value != "" {
		m[key] = *value
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
