package fsstore

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ownerCheck knows who must own the entries under image_manager/: the owner
// of image_manager/ itself.
type ownerCheck struct {
	uid uint32
	ok  bool // false when the platform reports no owners
}

// check returns an error when fi is not owned by the expected user.
func (o ownerCheck) check(fi fs.FileInfo) error {
	uid, ok := fileOwner(fi)
	if !ok {
		return nil
	}
	return o.checkUID(uid)
}

// checkUID is check for an entry owned by uid.
func (o ownerCheck) checkUID(uid uint32) error {
	if !o.ok || uid == o.uid {
		return nil
	}
	return fmt.Errorf("owned by uid %d, image_manager/ by uid %d", uid, o.uid)
}

func fileOwner(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// storeOwner returns the owner of image_manager/.
func storeOwner(root *os.Root) (ownerCheck, error) {
	fi, err := root.Lstat(DirName)
	if err != nil {
		return ownerCheck{}, err
	}
	uid, ok := fileOwner(fi)
	return ownerCheck{uid: uid, ok: ok}, nil
}

// inspectStoreDir reports image_manager/'s own mode and owner (it must be
// 0700 and owned by root or by the user inspecting) and returns the owner
// every entry below must have.
func inspectStoreDir(root *os.Root, r *Report) (ownerCheck, error) {
	fi, err := root.Lstat(DirName)
	if err != nil {
		return ownerCheck{}, err
	}
	owner, err := storeOwner(root)
	if err != nil {
		return ownerCheck{}, err
	}
	if euid := uint32(os.Geteuid()); owner.ok && owner.uid != 0 && owner.uid != euid {
		r.Files = append(r.Files, FileReport{Dir: StoreDir, Problem: ProblemBadOwner,
			Err: fmt.Errorf("owned by uid %d, want root or uid %d", owner.uid, euid)})
	} else if fi.Mode().Perm() != dirPerm {
		r.Files = append(r.Files, FileReport{Dir: StoreDir, Problem: ProblemBadMode,
			Err: fmt.Errorf("directory mode %v, want %v", fi.Mode().Perm(), dirPerm)})
	}
	return owner, nil
}
