package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
)

// recordView is a pulled record as printed. It holds the credential hashes in
// full: JSON and YAML print them exactly, tables shorten them.
type recordView struct {
	ImageRef    string           `json:"imageRef"`
	File        string           `json:"file"`
	LastUpdated string           `json:"lastUpdatedTime"`
	Credentials []credentialView `json:"credentialMapping"`
}

// credentialView is one entry of a record's credential mapping.
type credentialView struct {
	Name            string               `json:"name"`
	NodeWide        bool                 `json:"nodePodsAccessible,omitempty"`
	Secrets         []secretView         `json:"kubernetesSecrets,omitempty"`
	ServiceAccounts []serviceAccountView `json:"kubernetesServiceAccounts,omitempty"`
}

// secretView is a secret with its credential hash; the JSON names are the
// kubelet's.
type secretView struct {
	UID            string `json:"uid"`
	Namespace      string `json:"namespace"`
	Name           string `json:"name"`
	CredentialHash string `json:"credentialHash"`
}

type serviceAccountView struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

type intentView struct {
	Image string `json:"image"`
	File  string `json:"file"`
}

func viewIntent(i *accessor.ImagePullIntent) intentView {
	return intentView{Image: i.Image, File: fsstore.DirName + "/" + fsstore.IntentsDir + "/" + fsstore.FileName(i.Image)}
}

func viewRecord(r *accessor.ImagePulledRecord) recordView {
	v := recordView{
		ImageRef: r.ImageRef,
		File:     fsstore.DirName + "/" + fsstore.RecordsDir + "/" + fsstore.FileName(r.ImageRef),
	}
	if !r.LastUpdatedTime.IsZero() {
		v.LastUpdated = r.LastUpdatedTime.UTC().Format("2006-01-02T15:04:05Z")
	}
	names := make([]string, 0, len(r.CredentialMapping))
	for n := range r.CredentialMapping {
		names = append(names, n)
	}
	sort.Strings(names)
	v.Credentials = []credentialView{}
	for _, n := range names {
		c := r.CredentialMapping[n]
		cv := credentialView{Name: n, NodeWide: c.NodePodsAccessible}
		for _, s := range c.KubernetesSecrets {
			cv.Secrets = append(cv.Secrets, secretView(s))
		}
		for _, sa := range c.KubernetesServiceAccounts {
			cv.ServiceAccounts = append(cv.ServiceAccounts, serviceAccountView(sa))
		}
		v.Credentials = append(v.Credentials, cv)
	}
	return v
}

// summary is the CREDENTIALS cell of a credential mapping entry.
func (c credentialView) summary() string {
	if c.NodeWide {
		return "node-wide"
	}
	var parts []string
	for _, s := range c.Secrets {
		parts = append(parts, "secret "+s.Namespace+"/"+s.Name)
	}
	for _, sa := range c.ServiceAccounts {
		parts = append(parts, "sa "+sa.Namespace+"/"+sa.Name)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// credentialsCell summarises a whole mapping for one table cell.
func (v recordView) credentialsCell() string {
	if len(v.Credentials) == 0 {
		return "none (tracked, re-verify)"
	}
	var parts []string
	for _, c := range v.Credentials {
		parts = append(parts, c.summary())
	}
	return strings.Join(parts, "; ")
}

func (v recordView) namesCell() string {
	if len(v.Credentials) == 0 {
		return "-"
	}
	var parts []string
	for _, c := range v.Credentials {
		parts = append(parts, c.Name)
	}
	return strings.Join(parts, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	if strings.HasSuffix(word, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(word, "y"))
	}
	return fmt.Sprintf("%d %ss", n, word)
}
