// Package wire holds the versioned kubelet.config.k8s.io types of pull records
// and the apimachinery scheme that decodes them. The field layout and JSON
// names are those of the kubelet's v1alpha1 and v1beta1 types; both versions
// have the same fields, so one Go type per kind serves both and the scheme
// registers it under each version.
//
// Guarantees: the JSON produced by encoding/json from these types is the
// kubelet's byte form. Non-guarantees: the types are not API; only the
// accessor package uses them.
package wire
