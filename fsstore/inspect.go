package fsstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// Problem names what is wrong with one entry of a store directory.
type Problem string

const (
	// ProblemCorrupt: the file cannot be read or decoded, or is too large.
	ProblemCorrupt Problem = "Corrupt"
	// ProblemKeyMismatch: the content names another key than the file name.
	ProblemKeyMismatch Problem = "KeyMismatch"
	// ProblemTempFile: a temporary file left by an interrupted write.
	ProblemTempFile Problem = "TempFile"
	// ProblemForeignFile: a name the kubelet never reads (no "sha256-" prefix).
	ProblemForeignFile Problem = "ForeignFile"
	// ProblemNotRegular: a symbolic link, directory, FIFO, socket or device.
	ProblemNotRegular Problem = "NotRegular"
	// ProblemOldVersion: a readable v1alpha1 file (not an error for reads).
	ProblemOldVersion Problem = "OldVersion"
	// ProblemWrongKind: a pulled record in the intents directory or an intent
	// in the records directory.
	ProblemWrongKind Problem = "WrongKind"
	// ProblemBadMode: a file whose permissions are not 0600, or a directory
	// (Name empty) whose permissions are not 0700.
	ProblemBadMode Problem = "BadMode"
	// ProblemBadOwner: an entry not owned by the owner of image_manager/,
	// or image_manager/ itself (Dir StoreDir) owned by neither root nor the
	// user running the inspection. Whoever owns an entry can rewrite it, so
	// a record owned by another user may have been planted. Repair reports
	// it and changes nothing.
	ProblemBadOwner Problem = "BadOwner"
	// ProblemPlaceholder: the fail-safe placeholder Repair left in place of
	// an entry a check read as an error. It still reads as corrupt, so a
	// check for its key answers "must pull" under every policy, as it did
	// before the repair; the kubelet's next pull of the image replaces it.
	// Repair leaves it alone, and it is not counted among the problems
	// left.
	ProblemPlaceholder Problem = "Placeholder"
)

// StoreDir is the FileReport.Dir of image_manager/ itself.
const StoreDir = "."

// FileReport describes one entry with a problem.
type FileReport struct {
	Dir     string // IntentsDir, RecordsDir, or StoreDir for image_manager/ itself
	Name    string // entry name; empty for the directory itself
	Kind    string // decoded kind, when the file decoded
	Version string // decoded version, when the file decoded
	Key     string // decoded key, when the file decoded
	Problem Problem
	Err     error // the cause, when there is one
}

// Report is what Inspect found.
type Report struct {
	// Intents and Records count the files that read back under their own
	// key, including old-version and bad-mode ones.
	Intents, Records int
	// Files lists only the entries with a problem (one problem per entry,
	// the most serious), readable old-version files and the fail-safe
	// placeholders a repair left (ProblemPlaceholder): image_manager/
	// itself, then each directory (itself first, then its entries in name
	// order).
	Files []FileReport
}

// Inspect reads both store directories in <kubeletDir>/image_manager and
// reports every entry with a problem. It never writes, and it never reads
// through a symbolic link.
func Inspect(kubeletDir string) (*Report, error) {
	root, err := openSafeRoot(kubeletDir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	r := &Report{}
	owner, err := inspectStoreDir(root, r)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{IntentsDir, RecordsDir} {
		d, err := openInspectDir(root, kubeletDir, name)
		if err != nil {
			return nil, err
		}
		err = inspectDir(root, d, owner, r)
		d.fs.Close()
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// openSafeRoot opens kubeletDir and checks that the store's directories are
// real directories.
func openSafeRoot(kubeletDir string) (*os.Root, error) {
	root, err := os.OpenRoot(kubeletDir)
	if err != nil {
		return nil, err
	}
	for _, sub := range []string{DirName, DirName + "/" + IntentsDir, DirName + "/" + RecordsDir} {
		if err := ensureDir(root, sub, false, false); err != nil {
			root.Close()
			return nil, fmt.Errorf("inspecting pull records in %s: %w", kubeletDir, err)
		}
	}
	return root, nil
}

func openInspectDir(root *os.Root, kubeletDir, name string) (*dir, error) {
	fsys, err := openRootDir(root, DirName+"/"+name)
	if err != nil {
		return nil, err
	}
	kind, what := accessor.KindImagePullIntent, "image pull intents"
	if name == RecordsDir {
		kind, what = accessor.KindImagePulledRecord, "image pulled records"
	}
	return newDir(name, filepath.Join(kubeletDir, DirName, name), kind, what, fsys), nil
}

func inspectDir(root *os.Root, d *dir, owner ownerCheck, r *Report) error {
	fi, err := root.Lstat(DirName + "/" + d.name)
	if err != nil {
		return err
	}
	if err := owner.check(fi); err != nil {
		r.Files = append(r.Files, FileReport{Dir: d.name, Problem: ProblemBadOwner, Err: err})
	} else if fi.Mode().Perm() != dirPerm {
		r.Files = append(r.Files, FileReport{Dir: d.name, Problem: ProblemBadMode,
			Err: fmt.Errorf("directory mode %v, want %v", fi.Mode().Perm(), dirPerm)})
	}
	entries, err := d.listAll()
	if err != nil {
		return fmt.Errorf("listing %s: %w", d.path, err)
	}
	files, readable := d.inspectAll(entries, owner, runtime.GOMAXPROCS(0))
	r.Files = append(r.Files, files...)
	if d.name == IntentsDir {
		r.Intents += readable
	} else {
		r.Records += readable
	}
	return nil
}

// inspectEntry examines one directory entry. ok says the file reads back
// under its own key; fr.Problem is empty when there is nothing to report.
func inspectEntry(d *dir, owner ownerCheck, name string, typ fs.FileMode) (fr FileReport, ok bool) {
	fr = FileReport{Dir: d.name, Name: name}
	switch {
	case strings.HasSuffix(name, tempSuffix):
		fr.Problem = ProblemTempFile
		return fr, false
	case typ.IsDir():
		fr.Problem, fr.Err = ProblemNotRegular, ErrNotRegular
		return fr, false
	case !strings.HasPrefix(name, namePrefix):
		fr.Problem = ProblemForeignFile
		return fr, false
	}
	data, err := d.readFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return FileReport{}, false
	}
	if err != nil {
		fr.Err = err
		fr.Problem = ProblemCorrupt
		if errors.Is(err, ErrNotRegular) {
			fr.Problem = ProblemNotRegular
		}
		return fr, false
	}
	fr, ok, done := inspectContent(d, fr, data)
	if done {
		return fr, ok
	}
	info, err := d.fs.Lstat(name)
	if err != nil {
		return fr, true
	}
	return modeProblem(fr, owner.check(info), info.Mode().Perm()), true
}

// inspectContent judges the content of the record file fr names. done says
// the verdict is final; otherwise the file reads back under its own key in
// the current version and only its mode and owner are left to check.
func inspectContent(d *dir, fr FileReport, data []byte) (_ FileReport, ok, done bool) {
	name := fr.Name
	if isPlaceholder(data) {
		fr.Problem = ProblemPlaceholder
		return fr, false, true
	}
	if f, ok := d.canonical(name, data); ok {
		// The form the kubelet writes, checked without decoding.
		fr.Kind, fr.Version, fr.Key = f.Kind, f.Version, f.Key
		return fr, true, false
	}
	dec, err := d.decode(name, data)
	fr.Kind, fr.Version, fr.Key = dec.Kind, dec.Version, dec.Key()
	switch {
	case errors.Is(err, ErrWrongKind):
		fr.Problem, fr.Err = ProblemWrongKind, err
		if d, derr := accessor.Decode(data); derr == nil {
			fr.Kind, fr.Version, fr.Key = d.Kind, d.Version, d.Key()
		}
		return fr, false, true
	case errors.Is(err, ErrKeyMismatch):
		fr.Problem, fr.Err = ProblemKeyMismatch, err
		return fr, false, true
	case err != nil:
		fr.Problem, fr.Err = ProblemCorrupt, err
		return fr, false, true
	case dec.Version == accessor.VersionV1alpha1:
		fr.Problem = ProblemOldVersion
		return fr, true, true
	}
	return fr, true, false
}

// modeProblem reports a readable record file owned by another user
// (ownerErr) or with another mode than 0600.
func modeProblem(fr FileReport, ownerErr error, perm fs.FileMode) FileReport {
	if ownerErr != nil {
		fr.Problem, fr.Err = ProblemBadOwner, ownerErr
	} else if perm != filePerm {
		fr.Problem = ProblemBadMode
		fr.Err = fmt.Errorf("file mode %v, want %v", perm, filePerm)
	}
	return fr
}

// Repair fixes what r reports (run Inspect first; a nil r runs it), and never
// turns a check's "must pull" into "may use":
//
//   - an entry under a record name that a check reads as an error (corrupt,
//     oversized, of the wrong kind, not a regular file) is moved to
//     <kubeletDir>/image_manager/quarantine/<dir>/<name> (a numeric suffix
//     is added if that name is taken) and the fail-safe placeholder takes
//     its name in the same atomic step (ProblemPlaceholder), so the key it
//     stands for, which nobody can tell from the hash, keeps reading as an
//     error: removing it would make a present image look preloaded, or let
//     a pull in flight be forgotten. Where the swap cannot be atomic (a
//     directory, on a file system without renameat2's RENAME_EXCHANGE) the
//     entry is left as it is;
//   - entries no check reads are moved to quarantine: files whose content
//     names another key (a check finds "no record" for either key, before
//     and after) and names that are not record names;
//   - temporary files are removed, v1alpha1 files rewritten as v1beta1 with
//     the same content, and bad modes reset to 0600 (files) and 0700
//     (directories).
//
// Each entry is examined again before it is changed, so an entry fixed since
// r was made is left alone. moved lists the entries moved to quarantine as
// "<dir>/<name>", placeholders' originals included. Every change is synced to
// disk.
//
// Repair takes the store's lock for its duration, as a writable Store does:
// while one is open it fails with a *LockedError (ErrLocked). Run it with the
// kubelet stopped too: a stock kubelet takes no lock.
func Repair(logger klog.Logger, kubeletDir string, r *Report) (moved []string, err error) {
	root, err := openSafeRoot(kubeletDir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	lock, err := lockStore(logger, root, kubeletDir)
	if err != nil {
		return nil, fmt.Errorf("repairing pull records in %s: %w", kubeletDir, err)
	}
	defer lock.Close()
	if r == nil {
		if r, err = Inspect(kubeletDir); err != nil {
			return nil, err
		}
	}
	dirs := map[string]*dir{}
	for _, name := range []string{IntentsDir, RecordsDir} {
		d, err := openInspectDir(root, kubeletDir, name)
		if err != nil {
			return nil, err
		}
		defer d.fs.Close()
		dirs[name] = d
	}
	var errs []error
	touched := map[string]bool{}
	for _, f := range r.Files {
		if f.Dir == StoreDir && f.Name == "" {
			if f.Problem == ProblemBadMode {
				if err := root.Chmod(DirName, dirPerm); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		d, ok := dirs[f.Dir]
		if !ok {
			errs = append(errs, fmt.Errorf("report names unknown directory %q", f.Dir))
			continue
		}
		if f.Name == "" {
			if f.Problem == ProblemBadMode {
				if err := root.Chmod(DirName+"/"+f.Dir, dirPerm); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		if f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." {
			errs = append(errs, fmt.Errorf("report names invalid entry %q", f.Name))
			continue
		}
		now := currentProblem(root, d, f.Name)
		if now == "" {
			logger.Info("Entry no longer has a problem, leaving it", "dir", f.Dir, "name", f.Name, "reported", f.Problem)
			continue
		}
		rel := f.Dir + "/" + f.Name
		switch now {
		case ProblemTempFile:
			if err := root.Remove(DirName + "/" + rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			touched[DirName+"/"+f.Dir] = true
			logger.Info("Removed temporary file", "dir", f.Dir, "name", f.Name)
		case ProblemCorrupt, ProblemWrongKind, ProblemNotRegular, ProblemKeyMismatch, ProblemForeignFile:
			// An entry a check reads as an error keeps a placeholder
			// under its name; one no check reads (a foreign name, content
			// naming another key) just moves.
			failSafe := now != ProblemKeyMismatch && now != ProblemForeignFile && isRecordName(f.Name)
			move := quarantine
			if failSafe {
				move = swapInPlaceholder
			}
			dst, err := move(root, f.Dir, f.Name)
			if errors.Is(err, errCannotSwap) {
				logger.Info("Kept an unreadable entry: it cannot be replaced by a placeholder atomically, and removing it could let a check skip a pull",
					"dir", f.Dir, "name", f.Name, "problem", now)
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("quarantining %s: %w", rel, err))
				continue
			}
			touched[DirName+"/"+f.Dir] = true
			touched[path.Dir(dst)] = true
			moved = append(moved, rel)
			logger.Info("Moved entry to quarantine", "dir", f.Dir, "name", f.Name, "problem", now, "to", dst, "placeholderLeft", failSafe)
		case ProblemOldVersion:
			if err := rewriteCurrent(d, f.Name); err != nil {
				errs = append(errs, fmt.Errorf("rewriting %s: %w", rel, err))
				continue
			}
			logger.Info("Rewrote file in the current version", "dir", f.Dir, "name", f.Name, "version", accessor.CurrentVersion)
		case ProblemBadMode:
			if err := root.Chmod(DirName+"/"+rel, filePerm); err != nil {
				errs = append(errs, err)
			}
		case ProblemBadOwner:
			logger.Info("Entry has another owner than image_manager/; left for an administrator", "dir", f.Dir, "name", f.Name)
		}
	}
	for p := range touched {
		if err := syncIn(root, p); err != nil {
			errs = append(errs, err)
		}
	}
	return moved, errors.Join(errs...)
}

// currentProblem examines name again.
func currentProblem(root *os.Root, d *dir, name string) Problem {
	info, err := d.fs.Lstat(name)
	if err != nil {
		return ""
	}
	owner, err := storeOwner(root)
	if err != nil {
		return ProblemBadOwner
	}
	fr, _ := inspectEntry(d, owner, name, info.Mode().Type())
	return fr.Problem
}

// quarantine moves image_manager/<dir>/<name> to
// image_manager/quarantine/<dir>/<name>, or <name>.N if that is taken, and
// returns the new path relative to root.
func quarantine(root *os.Root, dirName, name string) (string, error) {
	qdir, err := ensureQuarantine(root, dirName)
	if err != nil {
		return "", err
	}
	return moveToQuarantine(root, qdir, dirName, name, name)
}

// moveToQuarantine moves image_manager/<dir>/<src> into qdir (made by
// ensureQuarantine) as <name>, or <name>.N if that is taken, and returns the
// new path relative to root.
func moveToQuarantine(root *os.Root, qdir, dirName, src, name string) (string, error) {
	for i := 0; i < 1000; i++ {
		dst := qdir + "/" + name
		if i > 0 {
			dst += "." + strconv.Itoa(i)
		}
		if _, err := root.Lstat(dst); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return dst, root.Rename(DirName+"/"+dirName+"/"+src, dst)
	}
	return "", fmt.Errorf("too many quarantined copies of %s", name)
}

// ensureQuarantine creates image_manager/quarantine/<dir> if needed and
// returns its path relative to root.
func ensureQuarantine(root *os.Root, dirName string) (string, error) {
	qdir := DirName + "/" + quarantineDir + "/" + dirName
	for _, sub := range []string{DirName + "/" + quarantineDir, qdir} {
		if err := ensureDir(root, sub, true, true); err != nil {
			return "", err
		}
	}
	return qdir, nil
}

// rewriteCurrent rewrites an old-version file as the current version in place.
func rewriteCurrent(d *dir, name string) error {
	data, err := d.readFile(name)
	if err != nil {
		return err
	}
	dec, err := d.decode(name, data)
	if err != nil {
		return err
	}
	if data, err = accessor.Encode(dec); err != nil {
		return err
	}
	return d.put(name, data, true)
}

func syncIn(root *os.Root, p string) error {
	f, err := root.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
