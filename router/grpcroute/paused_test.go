package grpcroute_test

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
	"github.com/tenure-go/tenure/sim/cluster"
)

// An owner that is paused in the middle of a call (its handler blocked
// before its write) while it is cut off from etcd loses the partition to
// the next owner, which raises the store's fence; when the paused handler
// writes under its old token, the store refuses the write as stale, the
// node answers the retryable STALE refusal, and the client sends the call
// to the new owner, which applies it once; the paused node logs that its
// handler reported the end of its tenure. A streaming call is retried the
// same way, its messages sent again to the new owner.
func TestPausedOwnerStale(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "unary", true: "stream"}[streaming], func(t *testing.T) { testPausedOwnerStale(t, streaming) })
	}
}

func testPausedOwnerStale(t *testing.T, streaming bool) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "paused", true)
	var serverLogs testsupport.Buffer
	f.logger = hclog.New(&hclog.LoggerOptions{Output: &serverLogs, Level: hclog.Debug, JSONFormat: true})
	a := f.start("a")
	b := f.start("b")
	f.waitStable()
	key := keyOwnedBy(t, a, "paused")
	old := a.node.Lookup(key)

	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.store.mu.Lock()
	f.store.pause = func(ctx context.Context, k string) {
		if tok, _ := fence.FromContext(ctx); k == key && tok.Epoch == old.Epoch {
			once.Do(func() {
				close(paused)
				<-resume
			})
		}
	}
	f.store.mu.Unlock()

	var (
		mu       sync.Mutex
		attempts []error
	)
	record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		mu.Lock()
		attempts = append(attempts, err)
		mu.Unlock()
		return err
	}
	recordStream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return s, err
		}
		return &recordedStream{ClientStream: s, record: func(err error) {
			mu.Lock()
			attempts = append(attempts, err)
			mu.Unlock()
		}}, nil
	}
	reg := prometheus.NewRegistry()
	var logs testsupport.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug, JSONFormat: true})
	c, counter := newClient(t, f.cli, "paused", grpcroute.ClientConfig{Metrics: reg, Logger: log},
		grpc.WithChainUnaryInterceptor(record), grpc.WithChainStreamInterceptor(recordStream))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type answer struct {
		reply *counterpb.AddReply
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		if !streaming {
			reply, err := counter.Add(ctx, &counterpb.AddRequest{Key: key, Delta: 1})
			done <- answer{reply, err}
			return
		}
		s, err := counter.AddStream(grpcroute.WithKey(ctx, key))
		if err != nil {
			done <- answer{nil, err}
			return
		}
		_ = s.Send(&counterpb.AddRequest{Key: key, Delta: 1})
		reply, err := s.CloseAndRecv()
		done <- answer{reply, err}
	}()
	<-paused
	a.fp.Blackhole() // a's lease expires; b takes the partition over
	waitUntil(t, 20*time.Second, "b did not take the partition over", func() (string, <-chan struct{}) {
		ch := b.node.Changed()
		if r := b.node.Lookup(key); !r.Local || r.Epoch <= old.Epoch {
			return "b's route " + r.Owner, ch
		}
		return "", nil
	})
	require.Greater(t, f.store.gate.Floor(fence.PartitionScope(old.Partition)), old.Epoch, "b raised the fence")
	close(resume)

	got := <-done
	require.NoError(t, got.err)
	assert.Equal(t, "b", got.reply.Node)
	assert.Greater(t, got.reply.Epoch, old.Epoch)
	assert.Equal(t, int64(1), got.reply.Value, "the stale write did not happen; the retry applied the call once")
	assert.Equal(t, int64(1), f.store.value(key))

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(attempts), 2)
	ref := grpcroute.RefusalOf(attempts[0])
	require.NotNil(t, ref, "first attempt: %v", attempts[0])
	assert.Equal(t, tenurepb.Refusal_STALE, ref.Kind, "%v", attempts[0])
	assert.Equal(t, old.Epoch, ref.Presented)
	assert.Greater(t, ref.Current, old.Epoch)
	assert.NoError(t, attempts[len(attempts)-1])
	assert.Equal(t, int64(1), c.Stats().Retried)
	assert.Equal(t, 1.0, counterValue(t, reg, "tenure_grpc_client_calls_total", map[string]string{"result": "retried"}))
	assert.Equal(t, float64(c.Stats().Retries), counterValue(t, reg, "tenure_grpc_client_retries_total", nil))
	assert.Positive(t, a.rs.Stats().Refused, "a refused the stale write")
	assert.Contains(t, logs.String(), `"@message":"call refused; retrying"`)
	assert.Contains(t, logs.String(), `"key":"`+key+`"`)
	ended := logLines(t, serverLogs.Bytes(), "handler reports the end of its tenure; refusing for a retry")
	require.Len(t, ended, 1, "server logs:\n%s", serverLogs.String())
	assert.Equal(t, "debug", ended[0]["@level"])
	assert.Equal(t, "a", ended[0]["node"])
	assert.Equal(t, key, ended[0]["key"])
	assert.Equal(t, tenurepb.Refusal_STALE.String(), ended[0]["kind"])
	assert.Contains(t, ended[0]["error"], "stale")
	a.fp.Heal()
}

// recordedStream records the outcome of an attempt of a streaming call:
// the error of its first RecvMsg.
type recordedStream struct {
	grpc.ClientStream
	record func(error)
	once   sync.Once
}

func (s *recordedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	s.once.Do(func() { s.record(err) })
	return err
}

// logLines returns the JSON log lines in out whose message is msg.
func logLines(t *testing.T, out []byte, msg string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for line := range bytes.Lines(out) {
		var l map[string]any
		require.NoError(t, json.Unmarshal(line, &l), "log line %q", line)
		if l["@message"] == msg {
			lines = append(lines, l)
		}
	}
	return lines
}
