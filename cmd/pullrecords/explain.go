package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cmd/pullrecords/internal/explain"
	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/pullmanager"
	"github.com/pullrecords/pullrecords/recordsdir"
)

type explainOptions struct {
	secrets        []string
	serviceAccount string
	policy         string
	allowlist      []string
	protect        bool
	expiry         time.Duration
}

func newExplainCmd(g *globalOptions) *cobra.Command {
	o := &explainOptions{}
	cmd := &cobra.Command{
		Use:   "explain IMAGE IMAGEREF",
		Short: "Explain whether a pod must pull an image already present (read-only)",
		Long: `Explain the answer MustAttemptImagePull would give for a pod that asks for IMAGE
(the pod's image string, verbatim) when the node already has it as IMAGEREF (the
image ID), step by step, from the records on disk. The explanation comes from the
pull manager's own decision code, run in a dry-run mode over the store opened
read-only: nothing is written, and where the manager would update a record during
the check, the explanation says so.

"must pull" means the pod must prove to the registry that its credentials can
pull the image; it is an answer, not an error (exit status 0).

A --secret given without its hash (namespace/name/uid) has an unknown hash: it
can match a recorded secret by its coordinates, and the explanation says when
its credential, unknown, could have matched a recorded one.`,
		Example: `  pullrecords explain registry.example.com/team-a/app:1.0 sha256:4f1c... \
      --secret team-a/regcred/0b6e...:9a3c...
  pullrecords explain nginx sha256:... --policy AlwaysVerify`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeExplain(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExplain(cmd.Context(), g, o, args[0], args[1])
		},
	}
	addNoHeaders(cmd, g)
	f := cmd.Flags()
	f.StringArrayVar(&o.secrets, "secret", nil,
		"a pod pull secret as namespace/name/uid[:credential-hash] (repeatable); the hash is the full 64-digit one (pullrecords get -o json), "+
			"or left out when not known")
	f.StringVar(&o.serviceAccount, "service-account", "", "the pod's service account as namespace/name/uid")
	enumFlag(cmd, false, &o.policy, "policy", "", string(pullmanager.NeverVerifyPreloadedImages),
		"credential verification policy", policyNames...)
	f.StringSliceVar(&o.allowlist, "allowlist", nil, "allowlist patterns for NeverVerifyAllowlistedImages (comma-separated or repeated)")
	f.BoolVar(&o.protect, "protect-preloaded", false,
		"explain with the fix for kubernetes#138175 (pullmanager.WithPreloadedImageProtection): a record counts as pulled by the kubelet only for the names it maps")
	f.DurationVar(&o.expiry, "credential-expiry", 0,
		"explain with credential expiry (a fork's credentialExpiry): a recorded credential vouches only if a pull with it was recorded less than this long ago, "+
			"by the proofs in <kubelet-dir>/pullrecords/credential-proofs (read-only); 0: credentials never expire")
	return cmd
}

func (o *explainOptions) pod() (explain.Pod, error) {
	var pod explain.Pod
	for _, s := range o.secrets {
		sec, err := explain.ParseSecret(s)
		if err != nil {
			return pod, fmt.Errorf("%w: --secret: %w", errUsage, err)
		}
		pod.Secrets = append(pod.Secrets, sec)
	}
	if o.serviceAccount != "" {
		sa, err := explain.ParseServiceAccount(o.serviceAccount)
		if err != nil {
			return pod, fmt.Errorf("%w: --service-account: %w", errUsage, err)
		}
		pod.ServiceAccount = &sa
	}
	return pod, nil
}

func buildPolicy(name string, allowlist []string) (pullmanager.ImagePullPolicyEnforcer, error) {
	p, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.VerificationPolicy(name), allowlist)
	if err != nil {
		return nil, fmt.Errorf("%w: --policy/--allowlist: %w", errUsage, err)
	}
	return p, nil
}

func runExplain(ctx context.Context, g *globalOptions, o *explainOptions, image, imageRef string) error {
	pod, err := o.pod()
	if err != nil {
		return err
	}
	policy, err := buildPolicy(o.policy, o.allowlist)
	if err != nil {
		return err
	}
	if o.expiry < 0 {
		return fmt.Errorf("%w: --credential-expiry %v: want a duration above zero, or 0 for none", errUsage, o.expiry)
	}
	store, err := g.openReadOnly()
	if err != nil {
		return err
	}
	defer store.Close()
	var proofs *credstamp.Store
	if o.expiry > 0 {
		dir := recordsdir.CredentialProofsDir(g.kubeletDir)
		if proofs, err = credstamp.OpenReadOnly(g.logger(), dir); err != nil {
			return fmt.Errorf("reading the credential proofs: %w", err)
		}
		defer proofs.Close()
	}
	if ctx == nil {
		ctx = context.Background()
	}
	e, err := explain.Explain(klog.NewContext(ctx, g.logger()), store, explain.Options{
		Policy:           policy,
		PolicyName:       o.policy,
		ProtectPreloaded: o.protect,
		CredentialExpiry: o.expiry,
		Proofs:           proofs,
	}, image, imageRef, pod)
	if err != nil {
		return err
	}
	return g.emit(e, func(w io.Writer) error {
		return printExplanation(w, e, g.style())
	})
}

// policyNames are the values of --policy.
var policyNames = []string{
	string(pullmanager.NeverVerify),
	string(pullmanager.NeverVerifyPreloadedImages),
	string(pullmanager.NeverVerifyAllowlistedImages),
	string(pullmanager.AlwaysVerify),
}

// decisionWord is the answer in words.
func decisionWord(mustPull bool) string {
	if mustPull {
		return "must pull"
	}
	return "may use"
}

func printExplanation(w io.Writer, e explain.Explanation, s tableStyle) error {
	row(w, "image:", e.Image)
	row(w, "imageRef:", orDash(e.ImageRef))
	row(w, "policy:", orDash(e.Policy))
	row(w, "decision:", fmt.Sprintf("%s (%s), step %d: %s", decisionWord(e.MustPull), e.Result, e.DecidedAt, e.Rule))
	fmt.Fprintln(w)
	t := newTable(
		column{header: "STEP"},
		column{header: "CHECK", fit: fitWrap, min: 30},
		column{header: "FINDING", hex: true, fit: fitWrap, min: 50},
	)
	for _, st := range e.Steps {
		t.add(fmt.Sprint(st.Number), st.Check, st.Finding)
	}
	if err := t.write(w, s); err != nil {
		return err
	}
	if !e.CredentialsLookedUp && e.ImageRef != "" {
		fmt.Fprintln(w, "\nThe pod's credentials are not looked up for this decision.")
	}
	if r := e.WouldRecord; r != nil {
		fmt.Fprintf(w, "\nThe manager would record secret %s/%s (uid %s) for this image during the check.\n", esc(r.Namespace), esc(r.Name), esc(r.UID))
	}
	if e.HashUnknownMayMatter {
		for _, r := range e.UnknownHashes {
			note := fmt.Sprintf("Secret %s/%s (uid %s) was given without its credential hash (unknown hash): its coordinates "+
				"match no recorded secret, but its credential could equal a recorded one, which would let the pod use the "+
				"image (step 12). Give --secret %s/%s/%s:HASH to check.",
				esc(r.Namespace), esc(r.Name), esc(r.UID), esc(r.Namespace), esc(r.Name), esc(r.UID))
			fmt.Fprintln(w)
			for _, line := range wrap(note, tableWidth) {
				fmt.Fprintln(w, line)
			}
		}
	}
	return nil
}
