// Package counterpb holds the generated Go code of the grpccounter
// example's service (counter.proto). Regenerate with protoc 3.21.12,
// protoc-gen-go v1.36.12 and protoc-gen-go-grpc v1.5.1:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
//	go generate ./examples/grpccounter/counterpb/
package counterpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative counter.proto
