// Package imageruntime holds the few types a container runtime's image
// service and the pull manager exchange: Image and ImageLister (what the
// runtime has), AuthConfig (a registry credential as the kubelet holds it)
// and CredentialHash (the hash the kubelet stores for one), and
// RegistryHost, the one spelling of a registry's host for credentials,
// Docker config keys, flags and image references. It imports
// nothing else of this module, so an adapter to a runtime (package cri)
// depends on it alone, not on the pull manager.
//
// These are the only spelling of these types in the repository: the pull
// manager, the image cache, the adapters and the commands all name them
// here (pullmanager has no aliases for them).
package imageruntime
