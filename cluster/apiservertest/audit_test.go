package apiservertest_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/apiservertest"
)

// With AuditLog, a request is in the log, with its user, verb, resource and
// answer, as soon as its client has the answer.
func TestAuditLogHasEveryAnsweredRequest(t *testing.T) {
	s := server(t)
	if s.AuditLogPath == "" {
		t.Fatal("AuditLogPath is empty with Options.AuditLog set")
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited", Namespace: "default"}}
	if _, err := clientset(t, s.Admin).CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := clientset(t, s.Admin).CoreV1().ConfigMaps("default").Get(ctx, "not-there", metav1.GetOptions{})
	if err == nil {
		t.Fatal("GET of a missing ConfigMap succeeded")
	}
	events, err := apiservertest.ReadAudit(s.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	var created, missed bool
	for _, e := range events {
		if e.User.Username != "admin" || e.Resource() != "configmaps" || e.Namespace() != "default" || e.ResponseStatus == nil {
			continue
		}
		switch {
		case e.Verb == "create" && e.ResponseStatus.Code == 201:
			created = true
		case e.Verb == "get" && e.ObjectRef.Name == "not-there" && e.ResponseStatus.Code == 404:
			missed = true
		}
	}
	if !created || !missed {
		t.Errorf("audit log (%d events): create seen %v, failed get seen %v", len(events), created, missed)
	}
}
