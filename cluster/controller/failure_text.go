package controller

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// waitingText describes what a container was waiting for when its pull
// deadline passed. The kubelet often leaves the message empty (an app
// container waits as PodInitializing while the helper init container runs,
// and as ContainerCreating while its image is pulled), so the reason is
// spelled out rather than quoted as nothing.
func waitingText(w *corev1.ContainerStateWaiting) string {
	if w.Message != "" {
		return w.Reason + ": " + w.Message
	}
	switch w.Reason {
	case "PodInitializing":
		return "the pre-pull helper (init container " + installContainer + ") had not finished installing the no-op program"
	case "ContainerCreating":
		return "the kubelet was still creating the container, most likely still pulling the image"
	case "":
		return "the kubelet gave no reason"
	default:
		return "the kubelet's last state was " + w.Reason + ", with no message"
	}
}

// credentialHints are fragments of the pull errors containerd, CRI-O and
// the registries they talk to give when the registry refused the
// credentials (or their absence).
var credentialHints = []string{"401", "403", "unauthorized", "authorization failed", "authentication required",
	"no basic auth credentials", "access denied", "denied:"}

// withSecretHint appends to a pull failure that reads as a refused
// credential which pull secrets the cache gave the kubelet: the registry
// says only 401, and the kubelet pulls anonymously when a named secret is
// missing from the namespace (it logs that on the node, not on the pod's
// status), so the operator needs the names to check. The controller reads
// no Secrets, so it cannot tell which one is wrong.
func withSecretHint(ic *api.ImageCache, message string) string {
	lower := strings.ToLower(message)
	refused := false
	for _, h := range credentialHints {
		if strings.Contains(lower, h) {
			refused = true
			break
		}
	}
	if !refused {
		return message
	}
	if len(ic.Spec.ImagePullSecrets) == 0 {
		return message + " (the cache names no imagePullSecrets: add a secret holding credentials for this registry)"
	}
	names := make([]string, 0, len(ic.Spec.ImagePullSecrets))
	for _, s := range ic.Spec.ImagePullSecrets {
		names = append(names, s.Name)
	}
	return fmt.Sprintf("%s (the registry refused the credentials of imagePullSecrets %s: check that each exists in namespace %s and holds credentials for this registry)",
		message, strings.Join(names, ", "), ic.Namespace)
}

// namedList sorts names and joins text(name) for each with ", ", naming
// at most limit of them and then "and N more": a status message stays short
// however many nodes it is about.
func namedList(names []string, limit int, text func(string) string) string {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	var parts []string
	for i, n := range sorted {
		if i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(sorted)-i))
			break
		}
		parts = append(parts, text(n))
	}
	return strings.Join(parts, ", ")
}
