package crishim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/imageruntime"
)

func TestRequestFromCRI(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *runtimeapi.PullImageRequest
		want Request
	}{
		{name: "nil request", req: nil, want: Request{}},
		{name: "image only", req: &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}, want: Request{Image: "busybox:1.36"}},
		{
			name: "empty auth is none",
			req:  &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}, Auth: &runtimeapi.AuthConfig{}},
			want: Request{Image: "busybox"},
		},
		{
			name: "every auth field and the sandbox",
			req: &runtimeapi.PullImageRequest{
				Image: &runtimeapi.ImageSpec{Image: "registry.example.com/app:v1", UserSpecifiedImage: "ignored"},
				Auth: &runtimeapi.AuthConfig{
					Username: "u", Password: "p", Auth: "dTpw", ServerAddress: "registry.example.com",
					IdentityToken: "it", RegistryToken: "rt",
				},
				SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod", Namespace: "ns", Uid: "uid", Attempt: 3}},
			},
			want: Request{
				Image: "registry.example.com/app:v1",
				Auth: &imageruntime.AuthConfig{
					Username: "u", Password: "p", Auth: "dTpw", ServerAddress: "registry.example.com",
					IdentityToken: "it", RegistryToken: "rt",
				},
				Pod: Pod{Namespace: "ns", Name: "pod", UID: "uid"},
			},
		},
		{
			name: "one auth field is enough",
			req:  &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "x"}, Auth: &runtimeapi.AuthConfig{RegistryToken: "rt"}},
			want: Request{Image: "x", Auth: &imageruntime.AuthConfig{RegistryToken: "rt"}},
		},
		{
			name: "sandbox without metadata",
			req:  &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "x"}, SandboxConfig: &runtimeapi.PodSandboxConfig{}},
			want: Request{Image: "x"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, RequestFromCRI(tc.req)); diff != "" {
				t.Errorf("RequestFromCRI (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodString(t *testing.T) {
	if got := (Pod{Namespace: "ns", Name: "p"}).String(); got != "ns/p" {
		t.Errorf("String = %q", got)
	}
	if got := (Pod{}).String(); got != "<unknown>" {
		t.Errorf("empty Pod String = %q", got)
	}
}
