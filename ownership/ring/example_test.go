package ring_test

import (
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/ownership/ring"
)

func ExampleNew() {
	cfg := ring.DefaultConfig() // 1024 partitions, load factor 1.25, AlgorithmWeighted
	r, err := ring.New([]string{"node-c", "node-a", "node-b"}, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("members:", r.Members())

	// key -> partition -> owner: lock-free and allocation-free.
	p := ring.PartitionOf("order:42", r.Partitions())
	owner, _ := r.Owner(p)
	fmt.Printf("order:42 is in partition %d, owned by %s\n", p, owner)

	// No member owns more than ceil(1.25*1024/3)+1 partitions.
	for _, id := range r.Members() {
		fmt.Printf("%s owns %d partitions (at most %d)\n", id, len(r.Owned(id)), r.Capacity(id))
	}

	// A fourth node joins: only the partitions it takes over move.
	bigger, _ := ring.New([]string{"node-a", "node-b", "node-c", "node-d"}, cfg)
	moved := 0
	for p := range r.Partitions() {
		before, _ := r.Owner(p)
		after, _ := bigger.Owner(p)
		if before != after {
			moved++
		}
	}
	fmt.Printf("node-d gains %d partitions; %d partitions move in all\n", len(bigger.Owned("node-d")), moved)

	_, err = ring.New([]string{"node-a", "node-a"}, cfg)
	fmt.Println(errors.Is(err, ring.ErrDuplicateNodeID), err)
	// Output:
	// members: [node-a node-b node-c]
	// order:42 is in partition 1012, owned by node-a
	// node-a owns 330 partitions (at most 428)
	// node-b owns 341 partitions (at most 428)
	// node-c owns 353 partitions (at most 428)
	// node-d gains 261 partitions; 261 partitions move in all
	// true ring: duplicate node ID: "node-a"
}
