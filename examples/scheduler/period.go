package main

import "time"

// Periods are half-open intervals [start, start+length) of wall-clock time,
// aligned to the length (a 1m period starts on the minute, UTC). Wall clocks
// only say which period a run closes, the business meaning; they never
// decide who may write: the fence does.

// firstPeriod returns the start of the period that ended last at now: where
// a job that has never closed a period for a tenant begins.
func firstPeriod(now time.Time, length time.Duration) time.Time {
	return now.Truncate(length).Add(-length)
}

// due reports whether the period [start, start+length) has ended at now.
func due(start time.Time, length time.Duration, now time.Time) bool {
	return !start.Add(length).After(now)
}

// fromMillis converts a stored time (Unix milliseconds) to a time.Time in
// UTC.
func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// stamp formats t for logs: RFC 3339 in UTC, with as many fractional digits
// as t needs.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
