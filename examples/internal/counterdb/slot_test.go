package counterdb

import (
	"fmt"
	"testing"

	"github.com/tenure-go/tenure/ownership/ring"
)

// TestSlotRange checks that a key's slot is in the range of its partition
// under every power-of-two count, and in no other partition's range.
func TestSlotRange(t *testing.T) {
	for i := range 2000 {
		key := fmt.Sprintf("key-%d", i)
		s := SlotOf(key)
		for k := 0; k <= slotBits; k++ {
			count := 1 << k
			p := ring.PartitionOf(key, count)
			lo, hi, err := slotRange(p, count)
			if err != nil {
				t.Fatal(err)
			}
			if s < lo || s >= hi {
				t.Fatalf("%s: slot %d not in [%d, %d), the range of its partition %d of %d", key, s, lo, hi, p, count)
			}
			if q := (p + 1) % count; q != p {
				if lo, hi, _ := slotRange(q, count); s >= lo && s < hi {
					t.Fatalf("%s: slot %d in the range of partition %d of %d, not its own %d", key, s, q, count, p)
				}
			}
		}
	}
	for _, c := range []struct{ p, count int }{{0, 0}, {0, 3}, {0, 1<<slotBits + 1}, {4, 4}, {-1, 4}} {
		if _, _, err := slotRange(c.p, c.count); err == nil {
			t.Errorf("slotRange(%d, %d): no error", c.p, c.count)
		}
	}
}
