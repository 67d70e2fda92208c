package etcdfence

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEpochEncoding(t *testing.T) {
	for _, e := range []int64{1, 9, 10, 99, 1 << 31, 1<<63 - 1} {
		enc := encodeEpoch(e)
		require.Len(t, enc, epochWidth)
		got, err := decodeEpoch([]byte(enc))
		require.NoError(t, err)
		require.Equal(t, e, got)
	}
	for _, bad := range []string{"", "1", "000000000000000000x", "9999999999999999999", "00000000000000000001", "0000000000000000000"} {
		_, err := decodeEpoch([]byte(bad))
		require.ErrorIs(t, err, ErrCorruptFloor, bad)
	}
}

// FuzzEpochOrder: for positive epochs, byte order of the encodings is
// numeric order, decoding inverts encoding, and admitBound(a) sorts after
// exactly the encodings of epochs <= a.
func FuzzEpochOrder(f *testing.F) {
	f.Add(int64(1), int64(2))
	f.Add(int64(9), int64(10))
	f.Add(int64(1<<63-1), int64(999999999999999999))
	f.Fuzz(func(t *testing.T, a, b int64) {
		if a <= 0 || b <= 0 {
			return
		}
		ea, eb := encodeEpoch(a), encodeEpoch(b)
		if c := bytes.Compare([]byte(ea), []byte(eb)); c != cmpInt(a, b) {
			t.Fatalf("order of %d and %d: %q vs %q compare %d", a, b, ea, eb, c)
		}
		got, err := decodeEpoch([]byte(ea))
		if err != nil || got != a {
			t.Fatalf("decode(%q) = %d, %v", ea, got, err)
		}
		// The steady form's check: Value(floor) < admitBound(a) iff floor <= a.
		if lt := bytes.Compare([]byte(eb), admitBound(a)) < 0; lt != (b <= a) {
			t.Fatalf("floor %d < admitBound(%d) is %v", b, a, lt)
		}
	})
}

// FuzzDecodeEpoch: decoding never panics and accepts only canonical
// encodings.
func FuzzDecodeEpoch(f *testing.F) {
	f.Add([]byte("0000000000000000042"))
	f.Add([]byte("9223372036854775808"))
	f.Fuzz(func(t *testing.T, v []byte) {
		e, err := decodeEpoch(v)
		if err != nil {
			return
		}
		if encodeEpoch(e) != string(v) {
			t.Fatalf("decode(%q) = %d re-encodes as %q", v, e, encodeEpoch(e))
		}
		if _, perr := strconv.ParseInt(string(v), 10, 64); perr != nil {
			t.Fatalf("decode accepted %q that ParseInt refuses", v)
		}
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
