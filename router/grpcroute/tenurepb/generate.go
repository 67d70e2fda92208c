// Package tenurepb holds the generated Go types of tenure's gRPC wire
// messages (tenure/v1/refusal.proto, proto package tenure.v1). Regenerate with
// protoc 3.21.12 and protoc-gen-go v1.36.12 (the module's
// google.golang.org/protobuf version):
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go generate ./router/grpcroute/tenurepb/
package tenurepb

//go:generate protoc --go_out=. --go_opt=module=github.com/tenure-go/tenure/router/grpcroute/tenurepb tenure/v1/refusal.proto
