package apiservertest

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// saTokenSeconds is the lifetime requested for service account tokens.
const saTokenSeconds = 3600

// ServiceAccountConfig creates namespace and service account name in it if
// missing (no controller-manager runs here, so nothing else would) and
// returns a config authenticating as that service account with a one-hour
// token from the TokenRequest API.
//
// If boundPod is not empty the token is bound to the pod namespace/boundPod,
// which must exist with spec.nodeName set: the token then carries the node
// claim, so the authenticated user has extra
// "authentication.kubernetes.io/node-name" = the pod's node, and it stops
// authenticating once the pod is deleted.
func (s *Server) ServiceAccountConfig(ctx context.Context, namespace, name, boundPod string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(s.Admin)
	if err != nil {
		return nil, fmt.Errorf("apiservertest: admin client: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("apiservertest: create namespace %s: %w", namespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("apiservertest: create service account %s/%s: %w", namespace, name, err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr(int64(saTokenSeconds)),
	}}
	if boundPod != "" {
		pod, err := cs.CoreV1().Pods(namespace).Get(ctx, boundPod, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("apiservertest: pod %s/%s to bind the token of %s to: %w", namespace, boundPod, name, err)
		}
		if pod.Spec.NodeName == "" {
			return nil, fmt.Errorf("apiservertest: pod %s/%s has no spec.nodeName: a token bound to it would carry no node-name claim", namespace, boundPod)
		}
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID,
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("apiservertest: token request for %s/%s: %w", namespace, name, err)
	}
	return s.ConfigForToken(tr.Status.Token), nil
}

func ptr[T any](v T) *T { return &v }
