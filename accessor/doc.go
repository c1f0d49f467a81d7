// Package accessor defines the pull records that enforce "ensure secret pulled
// images" (KEP-2535) on a node, the PullRecordsAccessor interface every store
// implements, the error values stores return, and the wire codec for the files
// the upstream kubelet keeps under <kubelet dir>/image_manager/.
//
// # Records
//
// An ImagePullIntent says a pull of an image string is in flight. An
// ImagePulledRecord says which credentials pulled the content named by an
// imageRef, per mapping key. The key is whatever the writer chose; the
// kubelet, and pullmanager by default, use the pod's image string with only
// its tag and digest cut ("busybox:1.36" is keyed "busybox", never
// "docker.io/library/busybox"; see pullmanager.MappingKey). This package
// neither computes nor checks keys. Both are plain Go structs; the versioned
// wire types with kind and apiVersion stay inside this package.
//
// # Codec guarantees
//
//   - Decoding accepts kubelet.config.k8s.io/v1alpha1 and v1beta1 objects of
//     kind ImagePullIntent and ImagePulledRecord, and nothing else. Unknown
//     fields, duplicate fields, a wrong kind and malformed JSON are errors that
//     match ErrMalformed with errors.Is.
//   - Encoding always produces kubelet.config.k8s.io/v1beta1 in the exact byte
//     form the kubelet writes: compact JSON, kind then apiVersion then the
//     fields in struct order, map keys sorted, lastUpdatedTime in whole-second
//     UTC RFC 3339, one trailing newline.
//   - Encoding a decoded value gives the same bytes as the kubelet would write
//     for it; decoding the encoded bytes gives an equal value.
//
// # Store contract
//
// Every PullRecordsAccessor must pass accessortest.Run. In short: values are
// copied in and out (a caller may mutate what it passed or received), lists of
// partly corrupt data return the good values plus a *ListError, deleting a
// missing key is not an error, a record whose content names another key is
// "not found", and all methods are safe for concurrent use.
//
// # Non-guarantees
//
// The codec does not validate image names or imageRefs beyond the key checks of
// ValidateKey, and it does not sort or de-duplicate credentials: record content
// is written as given, as the kubelet does.
package accessor
