package check_test

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/sim/check"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }

// ms is a time offset in milliseconds.
func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// wr builds a write of counter-like values.
func wr(id check.WriteID, writer string, epoch int64, inv, ret int, o check.Outcome, read, value string) check.Write {
	w := check.Write{ID: id, Key: "k", Scope: "p/0", Epoch: epoch, Writer: writer,
		Invoke: ms(inv), Return: ms(ret), Outcome: o, Value: value, Read: read, HasRead: read != "-"}
	if !w.HasRead {
		w.Read = ""
	}
	if o == check.Unknown {
		w.Return = check.Never
	}
	return w
}

func tenure(holder string, epoch int64, start, end int) check.Tenure {
	t := check.Tenure{Scope: "p/0", Epoch: epoch, Holder: holder, Start: ms(start), End: ms(end)}
	if end < 0 {
		t.End = check.Never
	}
	return t
}

func floor(epoch int64, at int) check.StoreEvent {
	return check.StoreEvent{Kind: check.FloorRaised, Scope: "p/0", Epoch: epoch, At: ms(at)}
}

func apply(id check.WriteID, at int) check.StoreEvent {
	return check.StoreEvent{Kind: check.WriteApplied, Write: id, At: ms(at)}
}

func mustNoErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
