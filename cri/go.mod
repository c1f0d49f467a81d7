module github.com/pullrecords/pullrecords/cri

go 1.26.0

require (
	github.com/distribution/reference v0.6.0
	github.com/google/go-cmp v0.7.0
	github.com/pullrecords/pullrecords v0.0.0-00010101000000-000000000000
	google.golang.org/grpc v1.85.0
	k8s.io/cri-api v0.37.2
	k8s.io/klog/v2 v2.140.0
)

require (
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/pullrecords/pullrecords => ../
