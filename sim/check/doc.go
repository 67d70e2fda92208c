// Package check records what a run did and decides whether it was safe.
//
// A run (the simulator under virtual time, a chaos run of real processes, a
// test) records its facts into a Recorder from as many goroutines as it
// likes, then takes a History and hands it to the checkers. Nothing in this
// package knows how the history was produced: times are time.Duration
// offsets from the start of the run, virtual or real.
//
// A History holds four kinds of facts:
//
//   - ownership: tenures, each (scope, epoch, holder) with the time it began
//     and ended;
//   - the store's log, in the store's own order: fence floors raised and
//     writes applied;
//   - write attempts as their writers saw them: key, scope, token epoch,
//     writer, invoke and return times, outcome (accepted, rejected, or
//     unknown when the writer cannot tell), the value written and, for a
//     read-modify-write, the value read;
//   - client operations for the linearizability check (register put/get,
//     counter increment with an idempotency key and counter read), and the
//     store's final state per key.
//
// The checkers, each returning a typed result that lists its violations:
//
//   - StaleWrites: no write applied under an epoch below the scope's floor
//     at the time it was applied;
//   - DoubleExecutions: at most one writer per (scope, epoch), and no older
//     holder writing after a newer holder has written while their tenures
//     overlap;
//   - Epochs: epochs strictly increase across successive tenures of a scope;
//   - LostUpdates: every acknowledged write survives in the final state
//     (read-modify-write chains without forks, counters equal to their
//     acknowledged increments, each applied once);
//   - Linearizable: every key's client operations are linearizable, checked
//     with porcupine;
//   - Liveness: every scope is owned again within a bound after faults heal.
//
// All runs them and gives a Report whose Summary is one row of the
// simulator's per-strategy table.
//
// The checkers are sound in one direction on purpose: when the history does
// not say in which order two things happened (their time intervals overlap
// and the store's log does not order them), a checker assumes the order
// that makes the run correct. A reported violation is a violation of every
// execution consistent with the history; a clean result means no
// violation could be proven.
package check
