package main

import (
	"context"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/cmd/pullrecords/internal/explain"
	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/pullmanager"
	"github.com/pullrecords/pullrecords/recordsdir"
)

// cmdPulledAgo: pulledago KUBELETDIR IMAGE IMAGEREF SECRET AGO — record,
// the way a kubelet with credential expiry does, that IMAGE was pulled as
// IMAGEREF with SECRET (namespace/name/uid:hash) AGO ago (a Go duration):
// the record is merged into the directory and the credential's proof is
// written in its credential-proofs directory, dated then.
func cmdPulledAgo(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 5 {
		ts.Fatalf("usage: pulledago KUBELETDIR IMAGE IMAGEREF SECRET AGO")
	}
	dir, image, imageRef := ts.MkAbs(args[0]), args[1], args[2]
	secret, err := explain.ParseSecret(args[3])
	ts.Check(err)
	ago, err := time.ParseDuration(args[4])
	ts.Check(err)
	clk := testingclock.NewFakeClock(time.Now().Add(-ago))
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.AlwaysVerify, nil)
	ts.Check(err)
	ctx := klog.NewContext(context.Background(), klog.Background())
	r, err := recordsdir.Open(ctx, dir, policy, nil,
		recordsdir.WithStoreOptions(fsstore.WithoutSync()),
		recordsdir.WithManagerOptions(pullmanager.WithClock(clk)),
		recordsdir.WithCredentialExpiry(recordsdir.CredentialProofsDir(dir), 24*time.Hour, credstamp.WithClock(clk)))
	ts.Check(err)
	defer r.Close()
	m := r.Manager()
	ts.Check(m.RecordPullIntent(klog.Background(), image))
	m.RecordImagePulled(ctx, image, imageRef, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{secret}})
}
