package counterdb

import (
	"fmt"
	"math/bits"

	"github.com/tenure-go/tenure/ownership/ring"
)

// A fleet's partition count can change while it serves (a resize: the
// count multiplied or divided by a power of two), and a key's partition
// with it: under 2P, partition p splits into p and p+P. So the counters
// table does not record a key's partition, which would go stale; it
// records its slot, a number that the key's hash alone decides, laid out
// so that the keys of partition p under any power-of-two count P are one
// range of slots, read with one indexed range query whatever the count
// was when they were written.
//
// A key's slot is the low slotBits bits of its hash (its partition under
// 2^slotBits partitions), bit-reversed: the keys of partition p under 2^k
// partitions are those whose low k bits are p, which reversed are the
// high k bits of the slot, a range of 2^(slotBits-k) slots. The counter
// therefore needs a power-of-two partition count (any count reachable
// from one by a resize is one too); a fleet of another count would need
// the odd factor of its count kept apart (the slot's high part the hash
// mod that factor), which this example does not do.
const slotBits = 20 // log2(ring.MaxPartitions)

// SlotOf returns key's slot.
func SlotOf(key string) int64 {
	low := uint32(ring.PartitionOf(key, 1<<slotBits))
	return int64(bits.Reverse32(low) >> (32 - slotBits))
}

// slotRange returns the slots [lo, hi) of the keys of partition p under
// count partitions, or an error if count is not a power of two in [1,
// 2^slotBits] or p is not below it.
func slotRange(p, count int) (lo, hi int64, err error) {
	if err := CheckCount(count); err != nil {
		return 0, 0, err
	}
	if p < 0 || p >= count {
		return 0, 0, fmt.Errorf("partition %d not in [0, %d)", p, count)
	}
	k := bits.TrailingZeros(uint(count))
	width := int64(1) << (slotBits - k)
	var top int64
	if k > 0 {
		top = int64(bits.Reverse32(uint32(p)) >> (32 - k))
	}
	return top * width, (top + 1) * width, nil
}

// CheckCount reports an error unless count is a partition count the
// counter's slots support: a power of two up to 2^slotBits.
func CheckCount(count int) error {
	if count < 1 || count > 1<<slotBits || count&(count-1) != 0 {
		return fmt.Errorf("partition count %d: the counter needs a power of two in [1, %d]", count, 1<<slotBits)
	}
	return nil
}
