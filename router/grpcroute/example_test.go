package grpcroute_test

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
)

// A refusal travels as the one detail of a call's status; RefusalOf reads
// it back (any gRPC client can: it is the proto message tenure.v1.Refusal).
func ExampleRefusalOf() {
	st, _ := status.New(codes.Unavailable, "not the owner").WithDetails(&tenurepb.Refusal{
		Kind: tenurepb.Refusal_NOT_OWNER, Retryable: true, Partition: 7, Owner: "n2", Addr: "10.0.0.2:9081", Epoch: 41,
	})
	err := st.Err()

	ref := grpcroute.RefusalOf(err)
	fmt.Println(status.Code(err), ref.Kind, ref.Partition, ref.Owner, ref.Addr, ref.Epoch, ref.Retryable)
	// Output: Unavailable NOT_OWNER 7 n2 10.0.0.2:9081 41 true
}
