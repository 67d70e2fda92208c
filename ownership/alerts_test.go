package ownership

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	pchunks "github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/stretchr/testify/require"
)

// The README's suggested alerts, evaluated as Prometheus would: the rules
// file is read out of the README (so that the documentation and the test
// cannot drift) and parsed by Prometheus's rule parser; the nodes' metrics
// are scraped over HTTP in the text format and parsed with expfmt; and each
// alert's expression is evaluated, at each scrape's instant, by
// Prometheus's PromQL engine over everything scraped so far.

// readmeAlerts returns the alerting rules of the README's "Suggested
// alerts" rules file.
func readmeAlerts(t *testing.T) []rulefmt.Rule {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, after, ok := bytes.Cut(readme, []byte("**Suggested alerts.**"))
	require.True(t, ok, "the README has no suggested alerts")
	_, after, ok = bytes.Cut(after, []byte("```yaml\n"))
	require.True(t, ok, "the suggested alerts have no rules file")
	file, _, ok := bytes.Cut(after, []byte("```\n"))
	require.True(t, ok, "the rules file does not end")
	groups, errs := rulefmt.Parse(file, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs, "the README's rules file")
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules = append(rules, r)
			}
		}
	}
	require.NotEmpty(t, rules)
	return rules
}

// scrapes is what a Prometheus server scraping some nodes would store: the
// samples of every series, with the target's instance label, and the
// instants of the scrapes. It is safe for concurrent use.
type scrapes struct {
	mu     sync.Mutex
	series map[string]*scrapedSeries // by labels
	times  []time.Time
}

type scrapedSeries struct {
	lset    labels.Labels
	samples []sample
}

// scrape reads the metrics that url serves in the text format and stores
// them under instance, at the instant of the read.
func (s *scrapes) scrape(instance, url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return fmt.Errorf("scrape %s: %w", url, err)
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.series == nil {
		s.series = map[string]*scrapedSeries{}
	}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			base := map[string]string{"instance": instance, "job": "tenure"}
			for _, l := range m.GetLabel() {
				base[l.GetName()] = l.GetValue()
			}
			for _, v := range values(name, mf.GetType(), m) {
				ls := labels.FromMap(base)
				b := labels.NewBuilder(ls).Set(labels.MetricName, v.name)
				for k, lv := range v.extra {
					b.Set(k, lv)
				}
				s.add(b.Labels(), sample{t: now.UnixMilli(), f: v.f})
			}
		}
	}
	s.times = append(s.times, now)
	return nil
}

func (s *scrapes) add(ls labels.Labels, smp sample) {
	key := ls.String()
	ser := s.series[key]
	if ser == nil {
		ser = &scrapedSeries{lset: ls}
		s.series[key] = ser
	}
	ser.samples = append(ser.samples, smp)
}

// value is one series' value in a scraped metric: a histogram has its
// buckets (le), sum and count.
type value struct {
	name  string
	extra map[string]string
	f     float64
}

func values(name string, typ dto.MetricType, m *dto.Metric) []value {
	switch typ {
	case dto.MetricType_COUNTER:
		return []value{{name: name, f: m.GetCounter().GetValue()}}
	case dto.MetricType_GAUGE:
		return []value{{name: name, f: m.GetGauge().GetValue()}}
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		out := []value{{name: name + "_sum", f: h.GetSampleSum()}, {name: name + "_count", f: float64(h.GetSampleCount())}}
		for _, b := range h.GetBucket() {
			out = append(out, value{name: name + "_bucket", extra: map[string]string{"le": formatLe(b.GetUpperBound())}, f: float64(b.GetCumulativeCount())})
		}
		return append(out, value{name: name + "_bucket", extra: map[string]string{"le": "+Inf"}, f: float64(h.GetSampleCount())})
	default:
		return []value{{name: name, f: m.GetUntyped().GetValue()}}
	}
}

func formatLe(ub float64) string {
	if math.IsInf(ub, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(ub, 'f', -1, 64)
}

// instants returns the instants of the scrapes so far.
func (s *scrapes) instants() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.times)
}

// firing evaluates expr, an alert's expression, at instant at over what
// was scraped so far, and returns the label sets of the alerts it fires.
func (s *scrapes) firing(t *testing.T, expr string, at time.Time) []labels.Labels {
	t.Helper()
	return s.stored().firing(t, expr, at)
}

// stored returns what was scraped so far, as a Prometheus storage.
func (s *scrapes) stored() seriesStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st seriesStore
	for _, ser := range s.series {
		st = append(st, storage.NewListSeries(ser.lset, asChunkSamples(ser.samples)))
	}
	slices.SortFunc(st, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return st
}

// firing evaluates expr, an alert's expression, at instant at over st,
// and returns the label sets of the alerts it fires.
func (st seriesStore) firing(t *testing.T, expr string, at time.Time) []labels.Labels {
	t.Helper()
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	defer eng.Close()
	q, err := eng.NewInstantQuery(context.Background(), st, nil, expr, at)
	require.NoError(t, err, expr)
	defer q.Close()
	res := q.Exec(context.Background())
	require.NoError(t, res.Err, expr)
	vec, err := res.Vector()
	require.NoError(t, err, expr)
	out := make([]labels.Labels, len(vec))
	for i, smp := range vec {
		out[i] = smp.Metric
	}
	return out
}

// sample is one scraped float sample.
type sample struct {
	t int64
	f float64
}

func (s sample) T() int64                      { return s.t }
func (s sample) ST() int64                     { return 0 }
func (s sample) F() float64                    { return s.f }
func (s sample) H() *histogram.Histogram       { return nil }
func (s sample) FH() *histogram.FloatHistogram { return nil }
func (s sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s sample) Copy() pchunks.Sample          { return s }

func asChunkSamples(ss []sample) []pchunks.Sample {
	out := make([]pchunks.Sample, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// seriesStore is a storage.Queryable over series held in memory, sorted
// by labels.
type seriesStore []storage.Series

func (st seriesStore) Querier(int64, int64) (storage.Querier, error) {
	return &storage.MockQuerier{SelectMockFunction: st.selectSeries}, nil
}

func (st seriesStore) selectSeries(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
next:
	for _, s := range st {
		for _, m := range ms {
			if !m.Matches(s.Labels().Get(m.Name)) {
				continue next
			}
		}
		out = append(out, s)
	}
	return &seriesList{series: out, i: -1}
}

// seriesList is a storage.SeriesSet of a slice.
type seriesList struct {
	series []storage.Series
	i      int
}

func (l *seriesList) Next() bool                        { l.i++; return l.i < len(l.series) }
func (l *seriesList) At() storage.Series                { return l.series[l.i] }
func (l *seriesList) Err() error                        { return nil }
func (l *seriesList) Warnings() annotations.Annotations { return nil }
