package hostedcluster

import (
	"bytes"
	_ "embed"
)

//go:embed rbac.yaml
var rbac []byte

// RBACManifest returns rbac.yaml: the ServiceAccount, Role and RoleBinding the applier needs in the "clusters"
// namespace of a management cluster.
func RBACManifest() []byte { return bytes.Clone(rbac) }
