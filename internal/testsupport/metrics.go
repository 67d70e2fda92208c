// Metrics: MetricSample, LookupMetric, MustMetric, WaitMetric and MetricValue read metrics back from a Prometheus registry in
// tests: one sample by name and labels, and its value.

package testsupport

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// MetricSample returns the sample of the metric name whose labels are exactly
// labels, or nil if there is none.
func MetricSample(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	return find(t, g, name, labels, true)
}

// LookupMetric returns the value (a counter's or gauge's value, a histogram's
// sample count) of the first sample of name that carries labels (and
// possibly others), and whether there is one.
func LookupMetric(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	m := find(t, g, name, labels, false)
	if m == nil {
		return 0, false
	}
	return MetricValue(m), true
}

// MustMetric is LookupMetric that fails the test if there is no such sample.
func MustMetric(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := LookupMetric(t, g, name, labels)
	if !ok {
		t.Fatalf("metric %s%v not found", name, labels)
	}
	return v
}

// WaitMetric waits until the value of name with labels (as LookupMetric reads
// it) is want, for a metric that is updated after the event a test waits
// on, and fails the test with the last value after timeout.
func WaitMetric(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string, want float64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, _ := LookupMetric(t, g, name, labels)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metric %s%v is %v after %v, want %v", name, labels, got, timeout, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// MetricValue returns a sample's counter or gauge value, or its histogram's
// sample count.
func MetricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

func find(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string, exact bool) *dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if exact && len(m.GetLabel()) != len(labels) {
				continue
			}
			have := make(map[string]string, len(m.GetLabel()))
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got, ok := have[k]; !ok || got != v {
					continue next
				}
			}
			return m
		}
	}
	return nil
}
