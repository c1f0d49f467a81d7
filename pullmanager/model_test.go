package pullmanager

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/memstore"
)

var modelSeed = flag.Uint64("model.seed", 0, "seed for TestModel (0: the fixed seeds)")

// The model universe: image strings, their runtime reference form, their
// mapping key as the kubelet computes it (the raw string with tag and
// digest cut), their key in the WithNormalizedImageNames mode, and the
// content they resolve to. app:v1 and mirror/app:v1 are the same content
// under two names (kubernetes#138175); the busybox spellings are the short
// forms pod specs use, several of them naming the same content.
type modelImage struct{ raw, canonical, key, normalizedKey, ref string }

const modelDigest = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

var universe = []modelImage{
	{"busybox", "docker.io/library/busybox:latest", "busybox", "docker.io/library/busybox", "sha256:bb"},
	{"docker.io/library/busybox:latest", "docker.io/library/busybox:latest", "docker.io/library/busybox", "docker.io/library/busybox", "sha256:bb"},
	{"docker.io/busybox", "docker.io/library/busybox:latest", "docker.io/busybox", "docker.io/library/busybox", "sha256:bb"},
	{"busybox:1.36", "docker.io/library/busybox:1.36", "busybox", "docker.io/library/busybox", "sha256:bb136"},
	{"library/busybox:1.36", "docker.io/library/busybox:1.36", "library/busybox", "docker.io/library/busybox", "sha256:bb136"},
	{"busybox:1.36@" + modelDigest, "docker.io/library/busybox@" + modelDigest, "busybox", "docker.io/library/busybox", "sha256:bb136"},
	{"localhost:5000/x/y:1", "localhost:5000/x/y:1", "localhost:5000/x/y", "localhost:5000/x/y", "sha256:xy"},
	{"registry.example/team/app:v1", "registry.example/team/app:v1", "registry.example/team/app", "registry.example/team/app", "sha256:app1"},
	{"other.example/mirror/app:v1", "other.example/mirror/app:v1", "other.example/mirror/app", "other.example/mirror/app", "sha256:app1"},
	{"registry.example/team/app:v2", "registry.example/team/app:v2", "registry.example/team/app", "registry.example/team/app", "sha256:app2"},
	{"registry.example/private/db:1", "registry.example/private/db:1", "registry.example/private/db", "registry.example/private/db", "sha256:db"},
}

// keyOf is im's mapping key in the model's mode.
func (md *model) keyOf(im modelImage) string {
	if md.normalized {
		return im.normalizedKey
	}
	return im.key
}

var (
	modelSecretCoords = [][3]string{{"u1", "a", "s1"}, {"u2", "a", "s2"}, {"u3", "b", "s1"}, {"u4", "b", "s9"}}
	modelHashes       = []string{"h1", "h2", ""}
	modelSAs          = []accessor.ImagePullServiceAccount{sa("sa1", "a", "default"), sa("sa2", "b", "default"), sa("sa3", "a", "builder")}
	modelPolicies     = []VerificationPolicy{NeverVerify, NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages, AlwaysVerify}
	modelAllowlist    = []string{"registry.example/team/*", "docker.io/library/busybox", "localhost:5000/x/y"}
)

type modelEntry struct {
	nodeWide bool
	secrets  map[[3]string]string // coords -> hash
	sas      map[accessor.ImagePullServiceAccount]bool
}

type modelRecord struct {
	updated time.Time
	entries map[string]*modelEntry
}

// model is the reference: the kubelet's PullManager and policies
// (pkg/kubelet/images/pullmanager/image_pull_manager.go and
// image_pull_policies.go) written as plainly as possible.
type model struct {
	protect    bool
	normalized bool // WithNormalizedImageNames and WithNormalizedAllowlist
	records    map[string]*modelRecord
	files      map[string]bool // stored intents
	counts     map[string]int  // in-flight pulls in this process
	present    map[string]bool // runtime: canonical reference -> present
	// pulledAt is when the manager last recorded a finished pull of each
	// imageRef (changed or not), since it started: a prune keeps those
	// records of pulls at or after its until.
	pulledAt map[string]time.Time
	// expiry is the credential TTL (0: credentials never expire), and
	// proofs when each credential last proved itself by a pull, per
	// imageRef and mapping key (WithCredentialExpiry).
	expiry time.Duration
	proofs map[modelProof]time.Time
}

// modelProof names one credential's proof: "h:"+hash for a secret recorded
// with a hash, "o:"+coordinates for one without, "sa:"+account.
type modelProof struct{ cred, key, ref string }

func secretProofOf(ref, key string, coords [3]string, hash string) modelProof {
	if hash != "" {
		return modelProof{"h:" + hash, key, ref}
	}
	return modelProof{"o:" + strings.Join(coords[:], "/"), key, ref}
}

// proven reports whether p still vouches at now.
func (md *model) proven(p modelProof, now time.Time) bool {
	if md.expiry == 0 {
		return true
	}
	t, ok := md.proofs[p]
	return ok && !t.After(now) && now.Sub(t) < md.expiry
}

// renew is a recorded pull's renewal of the proofs of c's credentials.
func (md *model) renew(ref, key string, c *accessor.ImagePullCredentials, now time.Time) {
	if md.expiry == 0 || c == nil {
		return
	}
	for _, s := range c.KubernetesSecrets {
		md.proofs[secretProofOf(ref, key, [3]string{s.UID, s.Namespace, s.Name}, s.CredentialHash)] = now
	}
	for _, a := range c.KubernetesServiceAccounts {
		md.proofs[modelProof{"sa:" + a.Namespace + "/" + a.Name + "/" + a.UID, key, ref}] = now
	}
}

func (md *model) policy(p VerificationPolicy, key string, pulled bool) bool {
	switch p {
	case NeverVerify:
		return false
	case NeverVerifyPreloadedImages:
		return pulled
	case AlwaysVerify:
		return true
	}
	// The allowlist (modelAllowlist) matches the key: a pattern without
	// wildcard names exactly one key, so "busybox" is not allowlisted by
	// "docker.io/library/busybox" unless names are normalised.
	return !(key == "docker.io/library/busybox" || key == "localhost:5000/x/y" || strings.HasPrefix(key, "registry.example/team/"))
}

func (md *model) apply(ref, key string, c *accessor.ImagePullCredentials, now time.Time) {
	r := md.records[ref]
	empty := c == nil || (!c.NodePodsAccessible && len(c.KubernetesSecrets) == 0 && len(c.KubernetesServiceAccounts) == 0)
	if md.protect && empty {
		// With the protection, a pull without usable credentials leaves an
		// empty entry for its own name.
		if r == nil {
			r = &modelRecord{entries: map[string]*modelEntry{}}
			md.records[ref] = r
		} else if r.entries[key] != nil {
			return
		}
		r.entries[key] = entryOf(&accessor.ImagePullCredentials{})
		r.updated = now.Truncate(time.Second)
		return
	}
	if r == nil {
		r = &modelRecord{updated: now.Truncate(time.Second), entries: map[string]*modelEntry{}}
		md.records[ref] = r
		if c != nil {
			r.entries[key] = entryOf(c)
		}
		return
	}
	if c == nil || (!c.NodePodsAccessible && len(c.KubernetesSecrets) == 0 && len(c.KubernetesServiceAccounts) == 0) {
		return
	}
	changed := false
	e := r.entries[key]
	switch {
	case e == nil:
		r.entries[key] = entryOf(c)
		changed = true
	case e.nodeWide:
	case c.NodePodsAccessible:
		r.entries[key] = &modelEntry{nodeWide: true, secrets: map[[3]string]string{}, sas: map[accessor.ImagePullServiceAccount]bool{}}
		changed = true
	case len(c.KubernetesSecrets) > 0:
		for _, s := range c.KubernetesSecrets {
			k := [3]string{s.UID, s.Namespace, s.Name}
			if h, ok := e.secrets[k]; !ok || h != s.CredentialHash {
				e.secrets[k] = s.CredentialHash
				changed = true
			}
		}
	default:
		for _, a := range c.KubernetesServiceAccounts {
			if !e.sas[a] {
				e.sas[a] = true
				changed = true
			}
		}
	}
	if changed {
		r.updated = now.Truncate(time.Second)
	}
}

// wouldWrite reports whether recording c for key in ref's record writes.
func (md *model) wouldWrite(ref, key string, c *accessor.ImagePullCredentials) bool {
	r := md.records[ref]
	if r == nil {
		return true
	}
	if c == nil || (!c.NodePodsAccessible && len(c.KubernetesSecrets) == 0 && len(c.KubernetesServiceAccounts) == 0) {
		return md.protect && r.entries[key] == nil
	}
	e := r.entries[key]
	switch {
	case e == nil:
		return true
	case e.nodeWide:
		return false
	case c.NodePodsAccessible:
		return true
	case len(c.KubernetesSecrets) > 0:
		for _, s := range c.KubernetesSecrets {
			if h, ok := e.secrets[[3]string{s.UID, s.Namespace, s.Name}]; !ok || h != s.CredentialHash {
				return true
			}
		}
		return false
	}
	for _, a := range c.KubernetesServiceAccounts {
		if !e.sas[a] {
			return true
		}
	}
	return false
}

func entryOf(c *accessor.ImagePullCredentials) *modelEntry {
	e := &modelEntry{nodeWide: c.NodePodsAccessible, secrets: map[[3]string]string{}, sas: map[accessor.ImagePullServiceAccount]bool{}}
	for _, s := range c.KubernetesSecrets {
		e.secrets[[3]string{s.UID, s.Namespace, s.Name}] = s.CredentialHash
	}
	for _, a := range c.KubernetesServiceAccounts {
		e.sas[a] = true
	}
	return e
}

type modelCheck struct {
	want, wantErr, credsAsked bool
	// allowedBy says why "no pull" is right: "policy", "nodeWide", "secret", "sa".
	allowedBy string
}

// check is the model decision; it applies the check-time write unless
// writeFails.
func (md *model) check(p VerificationPolicy, im modelImage, ref string, secrets []accessor.ImagePullSecret, podSA *accessor.ImagePullServiceAccount, credsErr bool, fail map[string]bool, now time.Time) modelCheck {
	if ref == "" {
		return modelCheck{want: true}
	}
	if fail["GetImagePulledRecord"] {
		return modelCheck{want: true}
	}
	r := md.records[ref]
	pulled := r != nil
	if pulled && md.protect && len(r.entries) > 0 {
		// With kubernetes#138175 protection, only a mapping for other
		// names says "preloaded under this one"; a record without any
		// mapping (recovery, credential-less pull) still counts as pulled.
		_, pulled = r.entries[md.keyOf(im)]
	}
	if !pulled {
		if md.counts[im.raw] > 0 {
			pulled = true
		} else if fail["ImagePullIntentExists"] {
			return modelCheck{want: true}
		} else {
			pulled = md.files[im.raw]
		}
	}
	if !md.policy(p, md.keyOf(im), pulled) {
		return modelCheck{want: false, allowedBy: "policy"}
	}
	if r == nil {
		return modelCheck{want: true}
	}
	e := r.entries[md.keyOf(im)]
	if e == nil {
		return modelCheck{want: true}
	}
	if e.nodeWide {
		return modelCheck{want: false, allowedBy: "nodeWide"}
	}
	if len(e.secrets) == 0 && len(e.sas) == 0 {
		return modelCheck{want: true}
	}
	if credsErr {
		return modelCheck{want: true, wantErr: true, credsAsked: true}
	}
	// The recorded secrets in the record's order (namespace, name, UID).
	var recorded [][3]string
	for c := range e.secrets {
		recorded = append(recorded, c)
	}
	sort.Slice(recorded, func(i, j int) bool {
		a, b := recorded[i], recorded[j]
		if a[1] != b[1] {
			return a[1] < b[1]
		}
		if a[2] != b[2] {
			return a[2] < b[2]
		}
		return a[0] < b[0]
	})
	key := md.keyOf(im)
	for _, ps := range secrets {
		pc := [3]string{ps.UID, ps.Namespace, ps.Name}
		for _, cc := range recorded {
			h := e.secrets[cc]
			if !(h != "" && h == ps.CredentialHash) && cc != pc {
				continue
			}
			from := secretProofOf(ref, key, cc, h)
			if !md.proven(from, now) {
				continue // an expired match does not vouch; another may
			}
			if !fail["WriteImagePulledRecord"] {
				md.apply(ref, key, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{ps}}, now)
			}
			if to := secretProofOf(ref, key, pc, ps.CredentialHash); md.expiry > 0 && to != from && md.proofs[to].Before(md.proofs[from]) {
				md.proofs[to] = md.proofs[from] // a rotated secret inherits the proof that vouched for it
			}
			return modelCheck{want: false, credsAsked: true, allowedBy: "secret"}
		}
	}
	if podSA != nil && e.sas[*podSA] && md.proven(modelProof{"sa:" + podSA.Namespace + "/" + podSA.Name + "/" + podSA.UID, key, ref}, now) {
		return modelCheck{want: false, credsAsked: true, allowedBy: "sa"}
	}
	return modelCheck{want: true, credsAsked: true}
}

type pendingPull struct{ im modelImage }

// switchPolicy lets the model test change the manager's policy per check.
type switchPolicy struct{ cur ImagePullPolicyEnforcer }

func (s *switchPolicy) RequireCredentialVerificationForImage(image string, pulled bool) bool {
	return s.cur.RequireCredentialVerificationForImage(image, pulled)
}

type modelRuntime struct{ md *model }

func (r modelRuntime) ListImages(context.Context) ([]imageruntime.Image, error) {
	byRef := map[string][]string{}
	for _, im := range universe {
		if r.md.present[im.canonical] && !contains(byRef[im.ref], im.canonical) {
			byRef[im.ref] = append(byRef[im.ref], im.canonical)
		}
	}
	var out []imageruntime.Image
	for ref, tags := range byRef {
		out = append(out, imageruntime.Image{ID: ref, RepoTags: tags})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestModel runs seeded random operation sequences against the manager and
// the reference model above, comparing every check's answer and, after every
// operation that changes records, the stored records and intents. Above all
// it asserts that a pod without matching credentials is never told "no pull
// needed" unless the policy exempts the image.
func TestModel(t *testing.T) {
	type variant struct {
		name    string
		ops     int
		protect bool
		// normalized runs the manager with WithNormalizedImageNames and the
		// allowlist with WithNormalizedAllowlist.
		normalized bool
		newStore   func(t *testing.T) func() accessor.PullRecordsAccessor
		// expiry runs the manager with WithCredentialExpiry of that TTL.
		expiry time.Duration
	}
	mem := func(t *testing.T) func() accessor.PullRecordsAccessor {
		s := memstore.New()
		return func() accessor.PullRecordsAccessor { return s }
	}
	disk := func(t *testing.T) func() accessor.PullRecordsAccessor {
		dir := t.TempDir()
		return func() accessor.PullRecordsAccessor {
			return openDiskStore(t, dir, fsstore.WithoutSync())
		}
	}
	variants := []variant{
		{"memstore", 10_000, false, false, mem, 0},
		{"memstore, kubernetes#138175 protection", 10_000, true, false, mem, 0},
		{"memstore, normalised names", 5_000, false, true, mem, 0},
		{"memstore cache over fsstore", 2_000, false, false, disk, 0},
		{"memstore cache over fsstore, protection", 1_000, true, false, disk, 0},
		{"memstore cache over fsstore, protection, normalised names", 1_000, true, true, disk, 0},
		{"memstore, credential expiry", 4_000, false, false, mem, 40 * time.Second},
		{"memstore, credential expiry, protection, normalised names", 2_000, true, true, mem, 25 * time.Second},
		{"memstore cache over fsstore, credential expiry", 1_000, false, false, disk, 40 * time.Second},
	}
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			seed := uint64(1000 + i)
			if *modelSeed != 0 {
				seed = *modelSeed
			}
			t.Logf("seed %d (rerun with -model.seed=%d)", seed, seed)
			runModel(t, seed, v.ops, v.protect, v.normalized, v.expiry, v.newStore(t))
		})
	}
}

func runModel(t *testing.T, seed uint64, ops int, protect, normalized bool, expiry time.Duration, open func() accessor.PullRecordsAccessor) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ctx := klog.NewContext(context.Background(), logr.Discard())
	logger := klog.FromContext(ctx)
	clk := testingclock.NewFakeClock(t0)
	md := &model{protect: protect, normalized: normalized, records: map[string]*modelRecord{}, files: map[string]bool{}, counts: map[string]int{}, present: map[string]bool{}, pulledAt: map[string]time.Time{},
		expiry: expiry, proofs: map[modelProof]time.Time{}}
	for _, im := range universe { // some images are preloaded
		if rng.IntN(3) == 0 {
			md.present[im.canonical] = true
		}
	}
	policies := map[VerificationPolicy]ImagePullPolicyEnforcer{}
	for _, p := range modelPolicies {
		var allow []string
		if p == NeverVerifyAllowlistedImages {
			allow = modelAllowlist
		}
		var opts []PolicyOption
		if normalized {
			opts = append(opts, WithNormalizedAllowlist())
		}
		e, err := NewImagePullCredentialVerificationPolicy(p, allow, opts...)
		if err != nil {
			t.Fatal(err)
		}
		policies[p] = e
	}
	pol := &switchPolicy{cur: policies[AlwaysVerify]}
	// fail holds the store methods that fail during the current operation;
	// injectFaults makes exactly those fail.
	fail := map[string]bool{}
	var fs *accessortest.FaultyAccessor
	injectFaults := func() {
		fs.Heal()
		for method := range fail {
			setFail(fs, method, fmt.Errorf("%s: %w", method, errInjected))
		}
	}
	// With expiry, the proofs live on disk and survive restarts: each start
	// opens the stamp directory again.
	stampDir := t.TempDir()
	var stamps *credstamp.Store
	start := func() *PullManager {
		fs = accessortest.Faulty(open())
		if expiry > 0 {
			if stamps != nil {
				stamps.Close()
			}
			var err error
			if stamps, err = credstamp.Open(logger, stampDir, credstamp.WithClock(clk)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { stamps.Close() })
		}
		m, err := NewImagePullManager(ctx, fs.Accessor(), pol, modelRuntime{md}, WithClock(clk), WithPreloadedImageProtection(protect), WithNormalizedImageNames(normalized),
			WithCredentialExpiry(expiry, stamps))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := start()
	var pending []pendingPull
	randCreds := func() *accessor.ImagePullCredentials {
		switch rng.IntN(6) {
		case 0:
			return nil
		case 1:
			return &accessor.ImagePullCredentials{NodePodsAccessible: true}
		case 2:
			c := modelSAs[rng.IntN(len(modelSAs))]
			return &accessor.ImagePullCredentials{KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{c}}
		case 3: // several distinct secrets, as a direct API caller might record
			var ss []accessor.ImagePullSecret
			for _, j := range rng.Perm(len(modelSecretCoords))[:1+rng.IntN(3)] {
				c := modelSecretCoords[j]
				ss = append(ss, secret(c[0], c[1], c[2], modelHashes[rng.IntN(len(modelHashes))]))
			}
			return &accessor.ImagePullCredentials{KubernetesSecrets: ss}
		default: // the kubelet's case: exactly one secret
			c := modelSecretCoords[rng.IntN(len(modelSecretCoords))]
			return &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{secret(c[0], c[1], c[2], modelHashes[rng.IntN(len(modelHashes))])}}
		}
	}
	finish := func(im modelImage, ok bool) {
		if !ok {
			m.RecordImagePullFailed(ctx, im.raw)
			md.decrement(im.raw, fail)
			return
		}
		md.present[im.canonical] = true
		c := randCreds()
		m.RecordImagePulled(ctx, im.raw, im.ref, c)
		md.pulledAt[im.ref] = clk.Now()
		if fail["WriteImagePulledRecord"] && md.wouldWrite(im.ref, md.keyOf(im), c) {
			return // the record write failed: the intent is kept
		}
		if fail["GetImagePulledRecord"] {
			delete(md.records, im.ref) // unreadable: overwritten with a fresh record
		}
		md.apply(im.ref, md.keyOf(im), c, clk.Now())
		md.renew(im.ref, md.keyOf(im), c, clk.Now())
		md.decrement(im.raw, fail)
	}
	checks, allowed := 0, 0
	for op := 0; op < ops; op++ {
		clear(fail)
		if rng.IntN(10) == 0 {
			fail[[]string{"ImagePullIntentExists", "WriteImagePullIntent", "DeleteImagePullIntent", "GetImagePulledRecord", "WriteImagePulledRecord"}[rng.IntN(5)]] = true
		}
		injectFaults()
		clk.Step(time.Duration(rng.IntN(3)) * time.Second)
		if expiry > 0 && rng.IntN(200) == 0 {
			clk.Step(expiry) // every proof made before now expires
		}
		im := universe[rng.IntN(len(universe))]
		desc := ""
		switch k := rng.IntN(100); {
		case k < 25: // a pull that ends now
			desc = "pull " + im.raw
			if err := m.RecordPullIntent(logger, im.raw); err != nil {
				if !fail["WriteImagePullIntent"] {
					t.Fatalf("op %d: RecordPullIntent: %v", op, err)
				}
				break
			}
			md.files[im.raw] = true
			md.counts[im.raw]++
			finish(im, rng.IntN(5) != 0)
		case k < 32: // a pull that stays in flight
			desc = "start pull " + im.raw
			if err := m.RecordPullIntent(logger, im.raw); err == nil {
				md.files[im.raw] = true
				md.counts[im.raw]++
				pending = append(pending, pendingPull{im})
			}
		case k < 38: // an in-flight pull ends
			if len(pending) == 0 {
				continue
			}
			j := rng.IntN(len(pending))
			p := pending[j]
			pending = append(pending[:j], pending[j+1:]...)
			desc = "finish pull " + p.im.raw
			finish(p.im, rng.IntN(4) != 0)
		case k < 90: // a check
			desc = "check " + im.raw
			checks++
			p := modelPolicies[rng.IntN(len(modelPolicies))]
			pol.cur = policies[p]
			ref := ""
			if md.present[im.canonical] {
				ref = im.ref
			}
			var podSecrets []accessor.ImagePullSecret
			for range rng.IntN(3) {
				c := modelSecretCoords[rng.IntN(len(modelSecretCoords))]
				podSecrets = append(podSecrets, secret(c[0], c[1], c[2], modelHashes[rng.IntN(len(modelHashes))]))
			}
			var podSA *accessor.ImagePullServiceAccount
			if rng.IntN(2) == 0 {
				a := modelSAs[rng.IntN(len(modelSAs))]
				podSA = &a
			}
			credsErr := rng.IntN(30) == 0
			asked := false
			get := func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
				asked = true
				if credsErr {
					return nil, nil, errInjected
				}
				return podSecrets, podSA, nil
			}
			want := md.check(p, im, ref, podSecrets, podSA, credsErr, fail, clk.Now())
			got, err := m.MustAttemptImagePull(ctx, im.raw, ref, get)
			if !got {
				allowed++
				if want.allowedBy == "" {
					t.Fatalf("op %d (seed %d): SECURITY: %s under %s with secrets %v SA %v was told no pull is needed, but the model finds no matching credentials and no policy exemption",
						op, seed, im.raw, p, podSecrets, podSA)
				}
			}
			if got != want.want || (err != nil) != want.wantErr || asked != want.credsAsked {
				t.Fatalf("op %d (seed %d): check %s ref %q policy %s secrets %v SA %v: got (%v, %v, asked %v), model (%v, err %v, asked %v)",
					op, seed, im.raw, ref, p, podSecrets, podSA, got, err, asked, want.want, want.wantErr, want.credsAsked)
			}
		case k < 94: // image GC, then prune
			desc = "prune"
			if rng.IntN(2) == 0 {
				gone := universe[rng.IntN(len(universe))].ref
				for _, x := range universe {
					if x.ref == gone {
						delete(md.present, x.canonical)
					}
				}
			}
			until := clk.Now().Add(-time.Duration(rng.IntN(20)) * time.Second)
			var list []string
			inList := map[string]bool{}
			for _, x := range universe {
				if md.present[x.canonical] && !inList[x.ref] {
					inList[x.ref] = true
					list = append(list, x.ref)
				}
			}
			clear(fail) // prune errors are covered elsewhere
			injectFaults()
			m.PruneUnknownRecords(ctx, list, until)
			for ref, r := range md.records {
				if !inList[ref] && r.updated.Before(until) && md.pulledAt[ref].Before(until) {
					delete(md.records, ref)
				}
			}
		case k < 97: // restart: a new manager over the same store
			desc = "restart"
			// The new manager's store starts without faults.
			clear(fail)
			for _, p := range pending { // the pull may have finished before the crash
				if rng.IntN(2) == 0 {
					md.present[p.im.canonical] = true
				}
			}
			pending = nil
			clear(md.counts)
			clear(md.pulledAt) // the new manager remembers nothing
			m = start()
			md.recover(clk.Now())
		default: // a preloaded image appears
			desc = "preload " + im.raw
			md.present[im.canonical] = true
		}
		if op%50 == 0 || strings.HasPrefix(desc, "restart") || strings.HasPrefix(desc, "prune") {
			compareState(t, op, seed, desc, fs.Inner(), md)
		}
	}
	compareState(t, ops, seed, "end", fs.Inner(), md)
	if checks == 0 || allowed == 0 || allowed == checks {
		t.Fatalf("degenerate run: %d checks, %d allowed", checks, allowed)
	}
	t.Logf("%d ops, %d checks, %d answered no pull needed", ops, checks, allowed)
}

func (md *model) decrement(image string, fail map[string]bool) {
	if md.counts[image] > 1 {
		md.counts[image]--
		return
	}
	if fail["DeleteImagePullIntent"] {
		return
	}
	delete(md.files, image)
	delete(md.counts, image)
}

// recover is start-up recovery: intents the runtime now has become empty
// records (if none exists) and are deleted. As the kubelet, an intent
// matches only when its raw string is one of the runtime's references (the
// canonical forms); in the normalised mode, when its canonical form is.
func (md *model) recover(now time.Time) {
	canon := map[string]modelImage{}
	for _, im := range universe {
		canon[im.raw] = im
	}
	refOf := map[string]string{} // runtime reference -> image ID
	for _, im := range universe {
		if md.present[im.canonical] {
			refOf[im.canonical] = im.ref
		}
	}
	for image := range md.files {
		lookup := image
		if md.normalized {
			lookup = canon[image].canonical
		}
		ref, ok := refOf[lookup]
		if !ok {
			continue
		}
		md.apply(ref, md.keyOf(canon[image]), nil, now)
		md.pulledAt[ref] = now
		delete(md.files, image)
	}
}

func compareState(t *testing.T, op int, seed uint64, desc string, store accessor.PullRecordsAccessor, md *model) {
	t.Helper()
	intents, err := store.ListImagePullIntents()
	if err != nil {
		t.Fatal(err)
	}
	var gotIntents, wantIntents []string
	for _, i := range intents {
		gotIntents = append(gotIntents, i.Image)
	}
	for i := range md.files {
		wantIntents = append(wantIntents, i)
	}
	sort.Strings(gotIntents)
	sort.Strings(wantIntents)
	if strings.Join(gotIntents, ",") != strings.Join(wantIntents, ",") {
		t.Fatalf("op %d (seed %d, after %s): intents %v, model %v", op, seed, desc, gotIntents, wantIntents)
	}
	records, err := store.ListImagePulledRecords()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range records {
		got[r.ImageRef] = describeRecord(r)
	}
	want := map[string]string{}
	for ref, r := range md.records {
		want[ref] = describeModel(r)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("op %d (seed %d, after %s):\nrecords %v\nmodel   %v", op, seed, desc, got, want)
	}
}

func describeRecord(r *accessor.ImagePulledRecord) string {
	var keys []string
	for k := range r.CredentialMapping {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s", r.LastUpdatedTime.UTC().Format(time.RFC3339))
	for _, k := range keys {
		c := r.CredentialMapping[k]
		var parts []string
		for _, s := range c.KubernetesSecrets {
			parts = append(parts, fmt.Sprintf("s:%s/%s/%s=%s", s.UID, s.Namespace, s.Name, s.CredentialHash))
		}
		for _, a := range c.KubernetesServiceAccounts {
			parts = append(parts, fmt.Sprintf("sa:%s/%s/%s", a.UID, a.Namespace, a.Name))
		}
		sort.Strings(parts)
		fmt.Fprintf(&b, " [%s nodeWide=%v %s]", k, c.NodePodsAccessible, strings.Join(parts, " "))
	}
	return b.String()
}

func describeModel(r *modelRecord) string {
	var keys []string
	for k := range r.entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s", r.updated.UTC().Format(time.RFC3339))
	for _, k := range keys {
		e := r.entries[k]
		var parts []string
		for c, h := range e.secrets {
			parts = append(parts, fmt.Sprintf("s:%s/%s/%s=%s", c[0], c[1], c[2], h))
		}
		for a := range e.sas {
			parts = append(parts, fmt.Sprintf("sa:%s/%s/%s", a.UID, a.Namespace, a.Name))
		}
		sort.Strings(parts)
		fmt.Fprintf(&b, " [%s nodeWide=%v %s]", k, e.nodeWide, strings.Join(parts, " "))
	}
	return b.String()
}
