package etcdfence

// This file plans the transactions of a commit.

// plan splits items, in order, into chunks that each fit one transaction:
// at most MaxTxnOps operations as etcd counts them (a data operation per
// write and a floor operation per scope in the largest branch), at most
// MaxTxnBytes, and no key written twice. Items that fit
// one transaction even with a scope each, and write distinct keys, are one
// chunk, found without counting scopes. distinct says that no two items
// write the same key (as in a Batcher's batch), so that it need not be
// checked.
func (s *Store) plan(items []item, distinct bool) [][]item {
	if 2*len(items) <= s.cfg.MaxTxnOps {
		bytes := 0
		for _, it := range items {
			bytes += it.p.size()
		}
		if bytes <= s.cfg.MaxTxnBytes && (distinct || distinctKeys(items)) {
			return [][]item{items}
		}
	}
	var chunks [][]item
	var cur []item
	keys := make(map[string]struct{}, min(len(items), s.cfg.MaxTxnOps))
	scopes := make(map[string]struct{}, min(len(items), s.cfg.MaxTxnOps))
	bytes := 0
	flush := func() {
		if len(cur) > 0 {
			chunks = append(chunks, cur)
		}
		cur = nil
		clear(keys)
		clear(scopes)
		bytes = 0
	}
	for _, it := range items {
		_, dupKey := keys[it.p.full]
		_, oldScope := scopes[it.p.w.Token.Scope]
		ops := len(cur) + 1 + len(scopes)
		if !oldScope {
			ops++
		}
		size := it.p.size()
		if len(cur) > 0 && (dupKey || ops > s.cfg.MaxTxnOps || bytes+size > s.cfg.MaxTxnBytes) {
			flush()
		}
		cur = append(cur, it)
		keys[it.p.full] = struct{}{}
		scopes[it.p.w.Token.Scope] = struct{}{}
		bytes += size
	}
	flush()
	return chunks
}

// smallDistinct is the number of items up to which distinctKeys compares
// every pair rather than fill a map: fewer string comparisons than a map's
// hashing, and no allocation.
const smallDistinct = 24

// distinctKeys reports whether no two items write the same key.
func distinctKeys(items []item) bool {
	if len(items) <= smallDistinct {
		for i := range items {
			for j := range i {
				if items[i].p.full == items[j].p.full {
					return false
				}
			}
		}
		return true
	}
	seen := make(map[string]struct{}, len(items))
	for _, it := range items {
		if _, dup := seen[it.p.full]; dup {
			return false
		}
		seen[it.p.full] = struct{}{}
	}
	return true
}
