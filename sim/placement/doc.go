// Package placement measures tenure's load balancer on virtual time: a
// fleet's ring (ring.NewWeighted with AlgorithmWeighted: the ring's own
// placement, by partition count per weight, blind to load) and the balancer's pass (balance.Plan, the code the real
// Balancer runs), applied as the Balancer applies it: each move becomes a
// placement folded into the ring with Ring.Place, each removal deletes
// one, and a partition moved is left alone for the cooldown.
//
// Load comes from one of two workloads over the fleet's real key ->
// partition function (ring.PartitionOf):
//
//   - keys: 1,000,000 keys whose rates follow Zipf's law, key k (k = 1..K)
//     at rate k^-s over the sum of them (s = 0.9), computed exactly;
//   - tenants: 5,000 tenants whose sizes are log-uniform over 1..1,000,
//     each hashed to its partition by its name.
//
// The balancer sees load the way the nodes publish it: every LoadInterval
// of virtual time each partition's owner counts the units it admitted
// (the true rate times a multiplicative noise drawn per partition and
// tick, uniform in [1-Noise, 1+Noise]) and ticks its load meter,
// ownership's own (internal/loadmeter: an exponentially weighted moving
// average with time constant LoadWindow over the time the node has served
// the partition, rates rounded to three significant digits); a node that
// starts serving a partition discards the partial tick and takes the
// next full tick's rate. Every balance.Config.Interval a pass plans from
// the owners' smoothed rates.
//
// Every figure is reported beside the lower bound: the heaviest partition
// over the mean load per unit of weight (on the heaviest-weighted
// member), below which no placement can go. Imbalance is the largest load
// per unit of weight over the mean, computed from the true rates.
//
// Run computes the figures; `go run ./sim placement` prints them as a
// markdown table (and writes RESULTS.md with -out).
package placement
