// Package helmchart tests the Helm chart deploy/helm/pullrecords: with its
// default values it renders exactly the objects of deploy/crds and
// deploy/cluster (the CRDs plus Helm's keep policy), its CRI-O preset
// points the agent at CRI-O's socket and image store, and what it renders
// applies to a real kube-apiserver (package apiservertest). The package
// has no code of its own.
//
// The tests run helm from $PULLRECORDS_HELM (set by .ci/run), or else from
// the path scripts/helm.sh prints (which builds helm v3.22.0 into a cache
// outside the repository the first time, about a minute); a test that
// finds no helm fails, naming that command.
package helmchart
