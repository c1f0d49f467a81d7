package fsstore

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/accessor"
)

// A power cut keeps less than a process crash: the page cache is lost, so
// file data survives only if the file was fsynced, and a directory entry
// (a create, a rename, a remove) only if its directory was fsynced after it.
// A SIGKILL test cannot see a missing directory fsync; this model can.
//
// powerModel follows every mutating operation the store makes and can say at
// any moment what a power cut would leave on disk. Operations also go through
// to the real directory, so the store runs as usual.

type inode struct {
	data    []byte // what the process sees
	durable []byte // what survives a power cut
}

type dirModel struct {
	volatile map[string]*inode // the directory as the process sees it
	durable  map[string]*inode // the directory as a power cut leaves it
}

type powerModel struct {
	mu       sync.Mutex
	dirs     map[string]*dirModel
	dropSync bool                      // ignore directory fsyncs (a store without them)
	onChange func(state powerCutState) // called after every mutating operation
}

// powerCutState is the durable content of both directories: dir -> name -> bytes.
type powerCutState map[string]map[string][]byte

func newPowerModel() *powerModel {
	return &powerModel{dirs: map[string]*dirModel{}}
}

func (m *powerModel) dir(name string) *dirModel {
	d := m.dirs[name]
	if d == nil {
		d = &dirModel{volatile: map[string]*inode{}, durable: map[string]*inode{}}
		m.dirs[name] = d
	}
	return d
}

// changed records a mutation; m.mu must be held.
func (m *powerModel) changed() {
	if m.onChange == nil {
		return
	}
	state := powerCutState{}
	for dn, d := range m.dirs {
		files := map[string][]byte{}
		for name, ino := range d.durable {
			files[name] = append([]byte(nil), ino.durable...)
		}
		state[dn] = files
	}
	m.onChange(state)
}

func (m *powerModel) wrap(dir string, inner dirFS) dirFS {
	m.mu.Lock()
	m.dir(dir)
	m.mu.Unlock()
	return &powerFS{inner: inner, m: m, dir: dir}
}

type powerFS struct {
	inner dirFS
	m     *powerModel
	dir   string
}

func (p *powerFS) ReadDir() ([]fs.DirEntry, error)        { return p.inner.ReadDir() }
func (p *powerFS) Lstat(name string) (fs.FileInfo, error) { return p.inner.Lstat(name) }
func (p *powerFS) OpenRead(name string) (fsFile, error)   { return p.inner.OpenRead(name) }
func (p *powerFS) Close() error                           { return p.inner.Close() }
func (p *powerFS) mutate(apply func(d *dirModel)) {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	apply(p.m.dir(p.dir))
	p.m.changed()
}

func (p *powerFS) CreateExcl(name string) (fsFile, error) {
	f, err := p.inner.CreateExcl(name)
	if err != nil {
		return nil, err
	}
	ino := &inode{}
	p.mutate(func(d *dirModel) { d.volatile[name] = ino })
	return &powerFile{fsFile: f, ino: ino, p: p}, nil
}

func (p *powerFS) Rename(oldname, newname string) error {
	if err := p.inner.Rename(oldname, newname); err != nil {
		return err
	}
	p.mutate(func(d *dirModel) {
		d.volatile[newname] = d.volatile[oldname]
		delete(d.volatile, oldname)
	})
	return nil
}

func (p *powerFS) Remove(name string) error {
	if err := p.inner.Remove(name); err != nil {
		return err
	}
	p.mutate(func(d *dirModel) { delete(d.volatile, name) })
	return nil
}

func (p *powerFS) SyncDir() error {
	if err := p.inner.SyncDir(); err != nil {
		return err
	}
	p.mutate(func(d *dirModel) {
		if !p.m.dropSync {
			d.durable = maps.Clone(d.volatile)
		}
	})
	return nil
}

type powerFile struct {
	fsFile
	ino *inode
	p   *powerFS
}

func (f *powerFile) Write(b []byte) (int, error) {
	n, err := f.fsFile.Write(b)
	f.p.mutate(func(*dirModel) { f.ino.data = append(f.ino.data, b[:n]...) })
	return n, err
}

func (f *powerFile) Sync() error {
	if err := f.fsFile.Sync(); err != nil {
		return err
	}
	f.p.mutate(func(*dirModel) { f.ino.durable = append([]byte(nil), f.ino.data...) })
	return nil
}

// materialize writes state as a kubelet directory and returns its path.
func (s powerCutState) materialize(t *testing.T) string {
	t.Helper()
	kubeletDir := t.TempDir()
	for _, dn := range []string{IntentsDir, RecordsDir} {
		dir := filepath.Join(kubeletDir, DirName, dn)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for name, data := range s[dn] {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return kubeletDir
}

// powerOp is one public store operation in the power-loss workload.
type powerOp struct {
	intent bool
	key    string
	rec    *accessor.ImagePulledRecord // nil: delete
}

func powerWorkload() []powerOp {
	rec := func(ref string, n int) *accessor.ImagePulledRecord {
		return &accessor.ImagePulledRecord{
			LastUpdatedTime: metav1.NewTime(time.Date(2026, 11, 30, 10, 0, n, 0, time.UTC)),
			ImageRef:        ref,
			CredentialMapping: map[string]accessor.ImagePullCredentials{
				"registry.example/app": {KubernetesSecrets: []accessor.ImagePullSecret{{UID: fmt.Sprint("u", n), Namespace: "ns", Name: "s", CredentialHash: fmt.Sprint("h", n)}}},
			},
		}
	}
	return []powerOp{
		{key: "sha256:a", rec: rec("sha256:a", 1)},
		{intent: true, key: "registry.example/app:1"},
		{key: "sha256:a", rec: rec("sha256:a", 2)},
		{key: "sha256:b", rec: rec("sha256:b", 3)},
		{intent: true, key: "registry.example/app:1"}, // delete the intent
		{key: "sha256:a"}, // delete a
		{key: "sha256:b", rec: rec("sha256:b", 4)},
	}
}

// powerCrashPoint is a power cut at one moment of the workload.
type powerCrashPoint struct {
	state powerCutState
	acked map[string]*accessor.ImagePulledRecord // record key -> value (nil: absent); intents as "intent:"+image
	// inFlight is the operation running at the cut: its key may hold the
	// old or the new value.
	inFlight *powerOp
	previous *accessor.ImagePulledRecord
}

// runPowerWorkload runs the workload on a store over m and returns a crash
// point for every mutating file-system operation.
func runPowerWorkload(t *testing.T, m *powerModel) []powerCrashPoint {
	t.Helper()
	var points []powerCrashPoint
	acked := map[string]*accessor.ImagePulledRecord{}
	var inFlight *powerOp
	var previous *accessor.ImagePulledRecord
	m.onChange = func(state powerCutState) {
		points = append(points, powerCrashPoint{state: state, acked: maps.Clone(acked), inFlight: inFlight, previous: previous})
	}
	s, err := New(testLogger(t), t.TempDir(), withFS(m.wrap))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logger := testLogger(t)
	intentMarker := &accessor.ImagePulledRecord{}
	for i, op := range powerWorkload() {
		key := op.key
		if op.intent {
			key = "intent:" + op.key
		}
		op := op
		inFlight, previous = &op, acked[key]
		switch {
		case op.intent && acked[key] == nil:
			err = s.WriteImagePullIntent(logger, op.key)
		case op.intent:
			err = s.DeleteImagePullIntent(logger, op.key)
		case op.rec != nil:
			err = s.WriteImagePulledRecord(logger, op.rec)
		default:
			err = s.DeleteImagePulledRecord(logger, op.key)
		}
		if err != nil {
			t.Fatalf("operation %d: %v", i, err)
		}
		switch {
		case op.intent && acked[key] == nil:
			acked[key] = intentMarker
		case op.intent || op.rec == nil:
			delete(acked, key)
		default:
			acked[key] = op.rec
		}
		inFlight, previous = nil, nil
	}
	m.onChange = nil
	return points
}

// checkPowerCut opens the store a power cut would leave and compares it with
// what was acknowledged. It returns a description of the first difference.
func checkPowerCut(t *testing.T, p powerCrashPoint) string {
	t.Helper()
	s, err := New(testLogger(t), p.state.materialize(t), WithoutSync())
	if err != nil {
		return fmt.Sprintf("store does not open: %v", err)
	}
	defer s.Close()
	if _, err := s.ListImagePulledRecords(); err != nil {
		return fmt.Sprintf("records do not list cleanly: %v", err)
	}
	if _, err := s.ListImagePullIntents(); err != nil {
		return fmt.Sprintf("intents do not list cleanly: %v", err)
	}
	flightKey := ""
	if p.inFlight != nil {
		flightKey = p.inFlight.key
		if p.inFlight.intent {
			flightKey = "intent:" + flightKey
		}
	}
	keys := map[string]bool{flightKey: flightKey != ""}
	for k := range p.acked {
		keys[k] = true
	}
	for key := range keys {
		got, err := readPowerKey(s, key)
		if err != nil {
			return fmt.Sprintf("%s: %v", key, err)
		}
		want := p.acked[key]
		if key != flightKey {
			if d := diffPowerValue(want, got); d != "" {
				return fmt.Sprintf("acknowledged %s lost or changed: %s", key, d)
			}
			continue
		}
		var next *accessor.ImagePulledRecord
		switch {
		case p.inFlight.intent && p.previous == nil:
			next = &accessor.ImagePulledRecord{}
		case p.inFlight.rec != nil && !p.inFlight.intent:
			next = p.inFlight.rec
		}
		if diffPowerValue(p.previous, got) != "" && diffPowerValue(next, got) != "" {
			return fmt.Sprintf("in-flight %s is neither old nor new: %+v", key, got)
		}
	}
	return ""
}

// readPowerKey reads a record, or an intent ("intent:" keys) as an empty
// record; nil means absent.
func readPowerKey(s *Store, key string) (*accessor.ImagePulledRecord, error) {
	if image, ok := strings.CutPrefix(key, "intent:"); ok {
		found, err := s.ImagePullIntentExists(image)
		if err != nil || !found {
			return nil, err
		}
		return &accessor.ImagePulledRecord{}, nil
	}
	rec, found, err := s.GetImagePulledRecord(key)
	if err != nil || !found {
		return nil, err
	}
	return rec, nil
}

func diffPowerValue(want, got *accessor.ImagePulledRecord) string {
	if (want == nil) != (got == nil) {
		return fmt.Sprintf("want present=%v, got present=%v", want != nil, got != nil)
	}
	if want == nil {
		return ""
	}
	return cmp.Diff(want.ForStorage(), got, cmpopts.EquateEmpty())
}

// TestPowerLossKeepsAcknowledgedWrites cuts the power after every mutating
// file-system operation of a workload of writes, overwrites and deletes: the
// store always opens cleanly, every acknowledged operation survives, and the
// operation in flight leaves its key wholly old or wholly new.
func TestPowerLossKeepsAcknowledgedWrites(t *testing.T) {
	points := runPowerWorkload(t, newPowerModel())
	if len(points) < 25 { // 5 writes of 5 operations, 2 deletes of 2
		t.Fatalf("only %d crash points: the model did not see the store's operations", len(points))
	}
	for i, p := range points {
		if problem := checkPowerCut(t, p); problem != "" {
			t.Errorf("power cut after file-system operation %d of %d: %s", i+1, len(points), problem)
		}
	}
}

// TestPowerLossModelCatchesMissingDirectorySync shows the test above can
// fail: with directory fsyncs ignored (as in a store that never makes
// them, like the kubelet's), a power cut loses acknowledged writes.
func TestPowerLossModelCatchesMissingDirectorySync(t *testing.T) {
	m := newPowerModel()
	m.dropSync = true
	points := runPowerWorkload(t, m)
	lost := 0
	for _, p := range points {
		if checkPowerCut(t, p) != "" {
			lost++
		}
	}
	if lost == 0 {
		t.Fatal("without directory fsyncs no power cut lost an acknowledged write: the model checks nothing")
	}
	t.Logf("without directory fsyncs, %d of %d power cuts lose acknowledged operations", lost, len(points))
}
