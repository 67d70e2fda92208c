// Package fleetview is the machinery that the ownership package's Node and
// the fleet package's Observer and Operator share to read a fleet from
// etcd, kept out of both public APIs: the Reader of members, drain marks
// and claims (a listing at one revision, then watches, a new listing after
// a failed watch, and one set of decoding rules), the State those fold
// into, the one rule that names a partition's Route, the fleet's spec
// in etcd (its stored form, EncodeSpec and DecodeSpec; EnsureSpec creates
// it, fleet.ReadSpec reads it; readers follow its ring algorithm), and the
// fleet version: the protocol features a build understands (Features, the
// one home of their names), the ones the spec records in use, and the one
// check that records a feature (RequireFeature).
package fleetview
