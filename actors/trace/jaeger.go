package trace

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrQuery: the trace store cannot be read.
var ErrQuery = errors.New("trace: query")

// Query selects step traces in Jaeger.
type Query struct {
	// URL is Jaeger's query address (trace.query_url).
	URL string
	// Service is the service.name the nodes traced as.
	Service string
	// Run, if set, keeps the steps of that run (the root's mgrpo.run).
	Run string
	// Since is how far back to look.
	Since time.Duration
	// Fetch is how many step traces to read before sorting (Jaeger's
	// limit applies before any order).
	Fetch int
}

// Span is one span of a step trace, as the trace store holds it.
type Span struct {
	ID, Parent, Name string
	Start            time.Time
	Duration         time.Duration
	// Node is the service.instance.id of the process that made it; Actor
	// the actor it concerns (its mgrpo.actor attribute), if any.
	Node, Actor string
	Attrs       map[string]string
	Error       bool
}

// End is when the span ended.
func (s Span) End() time.Time { return s.Start.Add(s.Duration) }

// StepTrace is the trace of one training step.
type StepTrace struct {
	ID    string
	Root  Span
	Spans []Span // every span: the root, then the rest in order of start
}

// Step is the step number of the trace (0 if unknown).
func (t StepTrace) Step() int {
	n, _ := strconv.Atoi(t.Root.Attrs["mgrpo.step"])
	return n
}

// Slow reports whether the trainer marked the step slow.
func (t StepTrace) Slow() bool { return t.Root.Attrs["mgrpo.slow"] == "true" }

// Slowest reads the step traces q selects from Jaeger's query API and
// returns them slowest first.
func Slowest(ctx context.Context, q Query) ([]StepTrace, error) {
	v := url.Values{"service": {q.Service}, "operation": {"step"}, "limit": {strconv.Itoa(max(q.Fetch, 1))}}
	end := time.Now()
	v.Set("end", strconv.FormatInt(end.UnixMicro(), 10))
	v.Set("start", strconv.FormatInt(end.Add(-q.Since).UnixMicro(), 10))
	if q.Run != "" {
		tags, _ := json.Marshal(map[string]string{"mgrpo.run": q.Run})
		v.Set("tags", string(tags))
	}
	u := q.URL + "/api/traces?" + v.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrQuery, err)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: Jaeger at %s does not answer: %v", ErrQuery, q.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrQuery, q.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s answered %s", ErrQuery, u, resp.Status)
	}
	traces, err := ParseJaeger(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrQuery, q.URL, err)
	}
	slices.SortFunc(traces, func(a, b StepTrace) int { return cmp.Compare(b.Root.Duration, a.Root.Duration) })
	return traces, nil
}

// jaegerTraces is the body of Jaeger's /api/traces.
type jaegerTraces struct {
	Data []struct {
		TraceID string `json:"traceID"`
		Spans   []struct {
			SpanID        string `json:"spanID"`
			OperationName string `json:"operationName"`
			References    []struct {
				RefType string `json:"refType"`
				SpanID  string `json:"spanID"`
			} `json:"references"`
			StartTime int64      `json:"startTime"` // µs since the epoch
			Duration  int64      `json:"duration"`  // µs
			Tags      []jaegerKV `json:"tags"`
			ProcessID string     `json:"processID"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string     `json:"serviceName"`
			Tags        []jaegerKV `json:"tags"`
		} `json:"processes"`
	} `json:"data"`
}

type jaegerKV struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// ParseJaeger reads the step traces of a Jaeger /api/traces body (traces
// without a "step" root are left out).
func ParseJaeger(body []byte) ([]StepTrace, error) {
	var jt jaegerTraces
	if err := json.Unmarshal(body, &jt); err != nil {
		return nil, err
	}
	var out []StepTrace
	for _, d := range jt.Data {
		t := StepTrace{ID: d.TraceID}
		for _, s := range d.Spans {
			sp := Span{ID: s.SpanID, Name: s.OperationName, Start: time.UnixMicro(s.StartTime),
				Duration: time.Duration(s.Duration) * time.Microsecond, Attrs: map[string]string{}}
			for _, r := range s.References {
				if r.RefType == "CHILD_OF" {
					sp.Parent = r.SpanID
				}
			}
			for _, kv := range s.Tags {
				sp.Attrs[kv.Key] = fmt.Sprint(kv.Value)
			}
			for _, kv := range d.Processes[s.ProcessID].Tags {
				if kv.Key == "service.instance.id" {
					sp.Node = fmt.Sprint(kv.Value)
				}
			}
			sp.Actor = sp.Attrs["mgrpo.actor"]
			sp.Error = sp.Attrs["error"] == "true" || sp.Attrs["otel.status_code"] == "ERROR"
			t.Spans = append(t.Spans, sp)
		}
		i := slices.IndexFunc(t.Spans, func(s Span) bool { return s.Name == "step" && s.Parent == "" })
		if i < 0 {
			continue
		}
		t.Root = t.Spans[i]
		t.Spans[0], t.Spans[i] = t.Spans[i], t.Spans[0]
		slices.SortStableFunc(t.Spans[1:], byStart)
		out = append(out, t)
	}
	return out, nil
}

// byStart orders spans by start time, then name, then ID: Jaeger returns a
// trace's spans in no fixed order, and a report of them should read the
// same every time.
func byStart(a, b Span) int {
	return cmp.Or(a.Start.Compare(b.Start), strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
}

// Segment is a stretch of a critical path: time that span alone (none of
// its children) accounts for.
type Segment struct {
	Span     Span
	Duration time.Duration
}

// CriticalPath returns the critical path of the step: walking back from
// the root's end, time belongs to the child that ended last before it
// (recursively), or to the span itself when no child was running. The
// segments follow the path in time order; their durations add up to the
// root's.
func CriticalPath(t StepTrace) []Segment {
	children := map[string][]Span{}
	for _, s := range t.Spans {
		if s.Parent != "" {
			children[s.Parent] = append(children[s.Parent], s)
		}
	}
	var path []Segment
	var walk func(s Span, until time.Time)
	walk = func(s Span, until time.Time) {
		kids := slices.Clone(children[s.ID])
		slices.SortFunc(kids, func(a, b Span) int { return b.End().Compare(a.End()) })
		cur := minTime(until, s.End())
		var rev []func()
		for _, c := range kids {
			if !c.End().After(s.Start) || c.Start.After(cur) {
				continue
			}
			end := minTime(c.End(), cur)
			if end.Before(c.Start) || !end.After(c.Start) {
				continue
			}
			if gap := cur.Sub(end); gap > 0 {
				seg := Segment{Span: s, Duration: gap}
				rev = append(rev, func() { path = append(path, seg) })
			}
			child := c
			rev = append(rev, func() { walk(child, end) })
			cur = maxTime(c.Start, s.Start)
		}
		if gap := cur.Sub(s.Start); gap > 0 {
			seg := Segment{Span: s, Duration: gap}
			rev = append(rev, func() { path = append(path, seg) })
		}
		for i := len(rev) - 1; i >= 0; i-- {
			rev[i]()
		}
	}
	walk(t.Root, t.Root.End())
	return path
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Largest is the segment holding the most time of a critical path, after
// merging the segments of one span.
func Largest(path []Segment) Segment {
	sum := map[string]Segment{}
	var best Segment
	for _, s := range path {
		m := sum[s.Span.ID]
		m.Span, m.Duration = s.Span, m.Duration+s.Duration
		sum[s.Span.ID] = m
		if m.Duration > best.Duration {
			best = m
		}
	}
	return best
}
