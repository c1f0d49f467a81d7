package imageruntime

import "testing"

func TestRegistryHost(t *testing.T) {
	tests := map[string]string{
		"":                                   "",
		"  ":                                 "",
		"https://index.docker.io/v1/":        "docker.io",
		"index.docker.io":                    "docker.io",
		"registry-1.docker.io":               "docker.io",
		"docker.io":                          "docker.io",
		"http://Registry.Example:5000/":      "registry.example:5000",
		"HTTPS://Registry.Example:5000/":     "registry.example:5000",
		"registry.example:5000":              "registry.example:5000",
		"registry.example":                   "registry.example",
		"registry.example:5000/v2/some/path": "registry.example:5000",
		"ghcr.io/":                           "ghcr.io",
		" quay.io ":                          "quay.io",
	}
	for in, want := range tests {
		if got := RegistryHost(in); got != want {
			t.Errorf("RegistryHost(%q) = %q, want %q", in, got, want)
		}
	}
}
