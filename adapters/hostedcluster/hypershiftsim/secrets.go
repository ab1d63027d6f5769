package hypershiftsim

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Keys of the Secrets HyperShift creates beside a HostedCluster.
const (
	KubeconfigKey = "kubeconfig"
	PasswordKey   = "password"
)

// createSecrets creates the admin kubeconfig and kubeadmin-password Secrets of hc, owned by it as HyperShift's are,
// before the status names them. Secrets that already exist are left as they are.
func (c *controller) createSecrets(ctx context.Context, hc *unstructured.Unstructured, ep apiEndpoint) error {
	owner := map[string]any{
		"apiVersion": hc.GetAPIVersion(), "kind": hc.GetKind(), "name": hc.GetName(), "uid": string(hc.GetUID()),
	}
	for name, data := range map[string]map[string]any{
		KubeconfigSecretName(hc.GetName()):        {KubeconfigKey: kubeconfig(hc.GetName(), ep)},
		KubeadminPasswordSecretName(hc.GetName()): {PasswordKey: rand.Text()},
	} {
		secret := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1",
			"kind":       "Secret",
			"metadata": map[string]any{
				"name": name, "namespace": hc.GetNamespace(), "ownerReferences": []any{owner},
				"labels": map[string]any{"app.kubernetes.io/managed-by": FieldManager},
			},
			"type":       "Opaque",
			"stringData": data,
		}}
		_, err := c.client.Resource(secrets()).Namespace(hc.GetNamespace()).
			Create(ctx, secret, metav1.CreateOptions{FieldManager: FieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating secret %s: %w", name, err)
		}
	}
	c.opts.Logger.Info("created secrets", "namespace", hc.GetNamespace(), "name", hc.GetName(),
		"kubeconfig_secret", KubeconfigSecretName(hc.GetName()))
	return nil
}

// deleteSecrets deletes what createSecrets created. Their owner reference would let the garbage collector do it,
// but test API servers run no garbage collector.
func (c *controller) deleteSecrets(ctx context.Context, hc *unstructured.Unstructured) error {
	for _, name := range []string{KubeconfigSecretName(hc.GetName()), KubeadminPasswordSecretName(hc.GetName())} {
		err := c.client.Resource(secrets()).Namespace(hc.GetNamespace()).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting secret %s: %w", name, err)
		}
	}
	return nil
}

// kubeconfig returns an admin kubeconfig for the simulated cluster. Nothing answers at its server; it is there
// for readers that check the Secret's shape.
func kubeconfig(name string, ep apiEndpoint) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: https://%[2]s
    insecure-skip-tls-verify: true
contexts:
- name: admin
  context:
    cluster: %[1]s
    user: admin
current-context: admin
users:
- name: admin
  user:
    token: simulated
`, name, net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))))
}
