package demo

import (
	"time"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/imageruntime"
)

// Pod is a pod's identity and the credentials it presents.
type Pod struct {
	Name           string // namespace/name
	Secrets        []accessor.ImagePullSecret
	ServiceAccount *accessor.ImagePullServiceAccount
	// PullPolicy is the container's imagePullPolicy; empty is IfNotPresent.
	PullPolicy string
}

// credentialHash is the kubelet's hash of the registry credential a docker
// config secret holds.
func credentialHash(user, password string) string {
	return imageruntime.CredentialHash(imageruntime.AuthConfig{Username: user, Password: password})
}

// startTime is the fake clock's start.
var startTime = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// The scenario's images.
const (
	imgTeamA   = "registry.example.com/team-a/api:1.4"
	imgTools   = "registry.example.com/team-c/tools:2.0"
	imgBatch   = "registry.example.com/team-c/batch:3.1"
	imgNginx   = "nginx:1.27"
	imgNginxFQ = "docker.io/library/nginx:1.27"
	imgPause   = "registry.k8s.io/pause:3.10"
	imgBusybox = "docker.io/library/busybox:1.36"
	imgAlpine  = "docker.io/library/alpine:3.20"
	imgMirror  = "registry.example.com/team-a/alpine:3.20"

	policyDefault   = "NeverVerifyPreloadedImages"
	policyAllowlist = "NeverVerifyAllowlistedImages"
	policyAlways    = "AlwaysVerify"
)

// The scenario's credentials.
var (
	hashA1 = credentialHash("team-a-robot", "first")
	hashA2 = credentialHash("team-a-robot", "rotated")
	hashB  = credentialHash("team-b-robot", "b")

	secretA       = accessor.ImagePullSecret{UID: "5b1c0c7e-a001", Namespace: "team-a", Name: "regcred", CredentialHash: hashA1}
	secretARot    = accessor.ImagePullSecret{UID: "5b1c0c7e-a001", Namespace: "team-a", Name: "regcred", CredentialHash: hashA2}
	secretAMirror = accessor.ImagePullSecret{UID: "5b1c0c7e-a002", Namespace: "team-a", Name: "regcred-mirror", CredentialHash: hashA2}
	secretB       = accessor.ImagePullSecret{UID: "9d2e44f0-b001", Namespace: "team-b", Name: "regcred", CredentialHash: hashB}
	saBuilder     = accessor.ImagePullServiceAccount{UID: "c3a7e1d2-c001", Namespace: "team-c", Name: "builder"}
)

func withSecrets(name string, s ...accessor.ImagePullSecret) Pod {
	return Pod{Name: name, Secrets: s}
}

func withSA(name string) Pod {
	sa := saBuilder
	return Pod{Name: name, ServiceAccount: &sa}
}

// setUp declares what the fake registries serve and what the node has before
// the kubelet starts.
func (p *player) setUp() {
	p.rt.serve("registry.example.com/team-a/api", repo{hashes: []string{hashA1, hashA2}})
	p.rt.serve("registry.example.com/team-c/tools", repo{accounts: []accessor.ImagePullServiceAccount{saBuilder}})
	p.rt.serve("registry.example.com/team-c/batch", repo{accounts: []accessor.ImagePullServiceAccount{saBuilder}})
	p.rt.serve("docker.io/library/nginx", repo{public: true})
	p.rt.serve("registry.k8s.io/pause", repo{public: true})
	p.rt.serve("docker.io/library/busybox", repo{public: true})
	p.rt.serve("docker.io/library/alpine", repo{public: true})
	p.rt.serve("registry.example.com/team-a/alpine", repo{hashes: []string{hashA1, hashA2}, sameAs: imgAlpine})
	p.rt.preload(imgPause)
	p.rt.preload(imgBusybox)
	p.rt.preload(imgAlpine)
}

// play is the embedded default scenario.
func (p *player) play() error {
	p.act("Team A pulls its private image; other tenants try to reuse it")
	p.start(withSecrets("team-a/api-0", secretA), imgTeamA)
	p.start(withSecrets("team-a/api-1", secretA), imgTeamA)
	p.start(withSecrets("team-b/snoop", secretB), imgTeamA)
	p.start(Pod{Name: "team-b/bare"}, imgTeamA)

	p.act("Team A rotates its registry password (same secret, new hash), then copies it to a second secret")
	p.start(withSecrets("team-a/api-2", secretARot), imgTeamA)
	p.start(withSecrets("team-a/api-3", secretAMirror), imgTeamA)

	p.act("Team C pulls with a service account token")
	p.start(withSA("team-c/tools-0"), imgTools)
	p.start(withSA("team-c/tools-1"), imgTools)
	p.start(withSecrets("team-a/tools", secretARot), imgTools)

	p.act("Anonymous and preloaded images; another spelling of a name is another mapping key, as in the kubelet")
	p.start(Pod{Name: "team-b/web"}, imgNginx)
	p.start(withSecrets("team-a/web", secretA), imgNginxFQ)
	p.start(withSecrets("team-b/sidecar", secretB), imgPause)

	p.act("The kubelet restarts in the middle of a pull")
	p.crashMidPull(withSA("team-c/batch-0"), imgBatch)
	p.restart()
	p.start(withSecrets("team-b/snoop-2", secretB), imgBatch)
	p.start(withSA("team-c/batch-1"), imgBatch)
	p.start(withSA("team-c/batch-2"), imgBatch)

	p.act("Image garbage collection removes nginx; records of images gone are pruned")
	p.prune(imgNginxFQ)
	p.start(withSecrets("team-a/web-2", secretA), imgNginx)

	p.act("Policy variants over the same records")
	p.usePolicy(policyAllowlist, []string{"registry.k8s.io/*"}, false)
	p.start(withSecrets("team-b/sidecar-2", secretB), imgPause)
	p.start(Pod{Name: "team-b/shell"}, imgBusybox)
	p.usePolicy(policyAlways, nil, false)
	p.start(withSecrets("team-a/api-4", secretARot), imgTeamA)
	p.start(Pod{Name: "team-b/pause"}, imgPause)

	p.act("A preloaded image's content is pulled under a second name with a secret (kubernetes#138175);\n" +
		"   team-b runs the alpine baked into the node image with imagePullPolicy: Never")
	never := func(name string) Pod { return Pod{Name: name, PullPolicy: PullPolicyNever} }
	p.usePolicy(policyDefault, nil, false)
	p.start(never("team-b/tool"), imgAlpine)
	p.start(withSecrets("team-a/mirror", secretARot), imgMirror)
	p.usePolicy(policyDefault, nil, true)
	p.start(never("team-b/tool-2"), imgAlpine)
	p.usePolicy(policyDefault, nil, false)
	p.start(never("team-b/tool-3"), imgAlpine)
	p.contrast("team-b/tool-2", "team-b/tool-3", imgAlpine, imgMirror)
	return p.err
}
