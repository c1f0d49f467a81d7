package originverify

import "testing"

func TestRegistryHost(t *testing.T) {
	tests := map[string]string{
		"busybox":                                           "docker.io",
		"library/busybox:1.36":                              "docker.io",
		"docker.io/library/busybox":                         "docker.io",
		"index.docker.io/library/busybox":                   "docker.io",
		"registry-1.docker.io/library/busybox":              "docker.io",
		"ghcr.io/org/app@sha256:" + sixtyFourZeroes:         "ghcr.io",
		"Registry.Example:5000/team/app:v1":                 "registry.example:5000",
		"localhost/app":                                     "localhost",
		"127.0.0.1:5000/a/b/c:v1@sha256:" + sixtyFourZeroes: "127.0.0.1:5000",
	}
	for image, want := range tests {
		got, err := RegistryHost(image)
		if err != nil || got != want {
			t.Errorf("RegistryHost(%q) = %q, %v; want %q", image, got, err, want)
		}
	}
}

const sixtyFourZeroes = "0000000000000000000000000000000000000000000000000000000000000000"

func TestParseTarget(t *testing.T) {
	digest := "sha256:" + sixtyFourZeroes
	tests := []struct {
		image string
		want  target
	}{
		{"busybox", target{registry: "docker.io", endpoint: "registry-1.docker.io", repository: "library/busybox", reference: "latest"}},
		{"index.docker.io/team/app:v1", target{registry: "docker.io", endpoint: "registry-1.docker.io", repository: "team/app", reference: "v1"}},
		{"registry.example:5000/team/app:v1@" + digest, target{registry: "registry.example:5000", endpoint: "registry.example:5000", repository: "team/app", reference: digest, digest: digest}},
		{"registry.example/app@" + digest, target{registry: "registry.example", endpoint: "registry.example", repository: "app", reference: digest, digest: digest}},
	}
	for _, tc := range tests {
		got, err := parseTarget(tc.image)
		if err != nil || got != tc.want {
			t.Errorf("parseTarget(%q) = %+v, %v; want %+v", tc.image, got, err, tc.want)
		}
	}
}
