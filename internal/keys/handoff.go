package keys

// Handoff returns node id's handoff key, bound to the node's lease. The
// node puts it in every transaction that deletes one of its claims or its
// member key, so that etcd refuses the deletion whenever it refuses puts
// (the NOSPACE alarm): a claim is never deleted while its successor could
// not create one.
func (l Layout) Handoff(id string) string { return l.prefix + "handoff/" + id }
