package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newGetCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "get IMAGEREF",
		Short: "Show one pulled record, decoded (read-only)",
		Long: `Show the pulled record stored for IMAGEREF (the image ID the runtime reports),
decoded, with its file name and the credentials per image name. Credential hashes
are shortened.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := g.openReadOnly()
			if err != nil {
				return err
			}
			defer store.Close()
			rec, exists, err := store.GetImagePulledRecord(args[0])
			switch {
			case err != nil:
				return fmt.Errorf("record for %s cannot be read (run \"pullrecords fsck\"): %w", args[0], err)
			case !exists:
				return fmt.Errorf("no pulled record for imageRef %q", args[0])
			}
			v := viewRecord(rec)
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
						row(w, "    secret", s.Namespace+"/"+s.Name, "uid "+s.UID, "hash "+orQuoted(s.CredentialHash))
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
