module github.com/pullrecords/pullrecords/cluster

go 1.26.0

require (
	github.com/go-logr/logr v1.4.3 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	k8s.io/api v0.37.2 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	k8s.io/client-go v0.37.2 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
)
