package ownership_test

import (
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/ownership"
)

func ExampleNewRing() {
	cfg := ownership.DefaultRingConfig() // 1024 partitions, load factor 1.25
	ring, err := ownership.NewRing([]string{"node-c", "node-a", "node-b"}, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("members:", ring.Members())

	// key -> partition -> owner: lock-free and allocation-free.
	p := ring.PartitionOf("order:42")
	owner, _ := ring.Owner(p)
	fmt.Printf("order:42 is in partition %d, owned by %s\n", p, owner)

	// No member owns more than ceil(1.25*1024/3) partitions.
	for _, id := range ring.Members() {
		fmt.Printf("%s owns %d partitions (at most %d)\n", id, ring.Load(id), ring.MaxLoad())
	}

	// A fourth node joins: only the partitions it takes over move.
	bigger, _ := ownership.NewRing([]string{"node-a", "node-b", "node-c", "node-d"}, cfg)
	changes, _ := ownership.Diff(ring, bigger)
	moved := 0
	for _, c := range changes {
		moved += len(c.Lost)
	}
	fmt.Printf("node-d gains %d partitions; %d partitions move in all\n", len(changes["node-d"].Gained), moved)

	_, err = ownership.NewRing([]string{"node-a", "node-a"}, cfg)
	fmt.Println(errors.Is(err, ownership.ErrDuplicateNodeID), err)
	// Output:
	// members: [node-a node-b node-c]
	// order:42 is in partition 1012, owned by node-b
	// node-a owns 275 partitions (at most 427)
	// node-b owns 384 partitions (at most 427)
	// node-c owns 365 partitions (at most 427)
	// node-d gains 320 partitions; 320 partitions move in all
	// true ownership: duplicate node ID: "node-a"
}
