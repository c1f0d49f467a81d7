// Package imageruntime holds the few types a container runtime's image
// service and the pull manager exchange: Image and ImageLister (what the
// runtime has), AuthConfig (a registry credential as the kubelet holds it)
// and CredentialHash (the hash the kubelet stores for one). It imports
// nothing else of this module, so an adapter to a runtime (package cri)
// depends on it alone, not on the pull manager.
//
// pullmanager keeps its names for them as aliases (pullmanager.Image,
// pullmanager.ImageLister, pullmanager.AuthConfig) and a
// pullmanager.CredentialHash that calls this package's, so either spelling
// works.
package imageruntime
