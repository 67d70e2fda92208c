// Ring IDs: RandomIDs generates the node IDs that the tests of the ring and of
// the simulator's ring figures draw: random valid IDs, with families of IDs
// that are prefixes of each other and IDs ending in digits, the inputs on
// which ring implementations collide.

package testsupport

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// idGen produces random valid node IDs, deliberately including families of
// IDs that are prefixes of each other and IDs ending in digits.
type idGen struct {
	rng  *rand.Rand
	seen map[string]bool
}

var idAlphabet = []rune("abcxyz0123456789-_.:@+~!ÅßéЖ日本🙂")

func (g *idGen) next() string {
	for {
		var id string
		switch g.rng.IntN(4) {
		case 0: // node-<k>: node-1, node-11 and node-111 share consistent's raw keys
			id = "node-" + strconv.Itoa(1+g.rng.IntN(200))
		case 1: // prefix family: n, n1, n11, n111, ...
			id = "n" + strings.Repeat("1", g.rng.IntN(12))
		case 2: // prefix family with a random base
			base := string(idAlphabet[g.rng.IntN(len(idAlphabet))])
			id = base + strings.Repeat(strconv.Itoa(g.rng.IntN(10)), g.rng.IntN(6))
		default:
			var b strings.Builder
			for range 1 + g.rng.IntN(20) {
				b.WriteRune(idAlphabet[g.rng.IntN(len(idAlphabet))])
			}
			id = b.String()
		}
		if !g.seen[id] {
			g.seen[id] = true
			return id
		}
	}
}

// RandomIDs returns n distinct random valid node IDs, drawn by idGen.
func RandomIDs(rng *rand.Rand, n int) []string {
	g := &idGen{rng: rng, seen: make(map[string]bool)}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = g.next()
	}
	return ids
}
