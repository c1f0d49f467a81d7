package main

import (
	"sort"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// completionRecords reads the records under --kubelet-dir for shell
// completion: opened read-only (no lock, nothing written), silently (a
// completion must print nothing but candidates), and readable records only.
func (g *globalOptions) completionRecords() ([]*accessor.ImagePullIntent, []*accessor.ImagePulledRecord) {
	if ok, err := hasStore(g.kubeletDir); err != nil || !ok {
		return nil, nil
	}
	s, err := fsstore.New(logr.Discard(), g.kubeletDir, fsstore.WithReadOnly())
	if err != nil {
		return nil, nil
	}
	defer s.Close()
	// A ListError still comes with what could be read.
	intents, _ := s.ListImagePullIntents()
	records, _ := s.ListImagePulledRecords()
	return intents, records
}

// candidates sorts and de-duplicates the strings that start with prefix.
func candidates(all []string, prefix string) []cobra.Completion {
	seen := map[string]bool{}
	out := []cobra.Completion{}
	for _, s := range all {
		if s == "" || seen[s] || !strings.HasPrefix(s, prefix) {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// completeGet completes get's IMAGEREF with the imageRefs on record.
func completeGet(g *globalOptions) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		_, records := g.completionRecords()
		var refs []string
		for _, r := range records {
			refs = append(refs, r.ImageRef)
		}
		return candidates(refs, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeExplain completes explain's IMAGE with the image names on record
// (credential mapping keys, the images of intents) and its IMAGEREF with the
// imageRefs of the records that map IMAGE's name (all imageRefs if none
// does).
func completeExplain(g *globalOptions) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 1 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		intents, records := g.completionRecords()
		var out []string
		if len(args) == 0 {
			for _, i := range intents {
				out = append(out, i.Image)
			}
			for _, r := range records {
				for name := range r.CredentialMapping {
					out = append(out, name)
				}
			}
			return candidates(out, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		key, err := pullmanager.MappingKey(args[0])
		var all []string
		for _, r := range records {
			all = append(all, r.ImageRef)
			if _, ok := r.CredentialMapping[key]; ok && err == nil {
				out = append(out, r.ImageRef)
			}
		}
		if len(candidates(out, toComplete)) == 0 {
			out = all
		}
		return candidates(out, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}
