package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/pullrecords/pullrecords/cmd/pullrecords/internal/explain"
)

func newGetCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "get IMAGEREF",
		Short: "Show one pulled record, decoded (read-only)",
		Long: `Show the pulled record stored for IMAGEREF (the image ID the runtime reports),
decoded, with its file name and the credentials per image name. The table
shortens credential hashes to their first 8 digits; -o wide prints them in full,
and so do -o json and -o yaml (the full hash is what explain --secret takes).

Exit status 1 when no record is stored for IMAGEREF (as kubectl's NotFound).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeGet(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Reads the one file FileName(IMAGEREF), whatever the
			// number of records.
			store, err := g.openUnscanned()
			if err != nil {
				return err
			}
			defer store.Close()
			rec, exists, err := store.GetImagePulledRecord(args[0])
			switch {
			case err != nil:
				return fmt.Errorf("record for %s cannot be read (run \"pullrecords fsck\"): %w", args[0], err)
			case !exists:
				return notFoundf("no pulled record for imageRef %q", args[0])
			}
			v := viewRecord(rec)
			wide := g.style().wide
			return g.emit(v, func(w io.Writer) error {
				row(w, "imageRef:", v.ImageRef)
				row(w, "file:", v.File)
				row(w, "lastUpdatedTime:", orDash(v.LastUpdated))
				if len(v.Credentials) == 0 {
					row(w, "credentials:", "none (tracked without credentials: every pod must re-verify)")
					return nil
				}
				row(w, "credentials:")
				for _, c := range v.Credentials {
					row(w, "  "+c.Name)
					if c.NodeWide {
						row(w, "    node-wide", "every pod on the node may use it")
					}
					for _, s := range c.Secrets {
						hash := s.CredentialHash
						if !wide {
							hash = explain.RedactHash(hash)
						}
						row(w, "    secret", s.Namespace+"/"+s.Name, "uid "+s.UID, "hash "+orQuoted(hash))
					}
					for _, sa := range c.ServiceAccounts {
						row(w, "    serviceaccount", sa.Namespace+"/"+sa.Name, "uid "+sa.UID)
					}
				}
				return nil
			})
		},
	}
}

func orQuoted(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
