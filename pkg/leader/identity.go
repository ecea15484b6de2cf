package leader

import (
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/uuid"
)

// serviceAccountNamespaceFile is where a pod learns its own namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// DefaultIdentity is hostname_uuid: the hostname is the pod's name in a
// cluster, and the UUID tells restarts of one pod apart.
func DefaultIdentity() string {
	host, _ := os.Hostname()
	return host + "_" + string(uuid.NewUUID())
}

// PodNamespace is the namespace this pod runs in, or "default" outside a
// cluster: where its Leases are held unless told otherwise.
func PodNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if data, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns
		}
	}
	return "default"
}
