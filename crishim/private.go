package crishim

import "github.com/pullrecords/pullrecords/accessor"

// privateContent returns the first of refs (image IDs or
// "repository@digest" references) that the records hold from a pull made
// with a pod's credential and from no pull open to every pod of the node,
// or "" for none. Content the node holds from an anonymous or node-wide
// pull is open to every pod anyway; content the records do not know was
// not pulled through this gate with a pod's credential.
func (g *Gate) privateContent(refs []string) (string, error) {
	for _, ref := range refs {
		rec, ok, err := g.cfg.Store.GetImagePulledRecord(ref)
		if err != nil {
			return "", err
		}
		if ok && !openToEveryPod(rec) {
			return ref, nil
		}
	}
	return "", nil
}

// openToEveryPod says whether a record has a credential mapping entry that
// every pod of the node may use.
func openToEveryPod(rec *accessor.ImagePulledRecord) bool {
	for _, c := range rec.CredentialMapping {
		if c.NodePodsAccessible {
			return true
		}
	}
	return false
}
