package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/mgrpo/mgrpo/actors/trace"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// runTraces runs `mgrpo-node traces --slow [--run NAME] [--since 1h]
// [--limit 10] [--html FILE]`: the slowest steps in Jaeger, each with its
// per-stage breakdown (node, actor, time, share of the step), its critical
// path and its Jaeger link.
func runTraces(args []string, stdout, stderr io.Writer) int {
	def := config.Default().Trace
	fs := pflag.NewFlagSet("mgrpo-node traces", pflag.ContinueOnError)
	slow := fs.Bool("slow", false, "list the slowest steps, slowest first (required)")
	run := fs.String("run", "", "only steps of this run (its name)")
	since := fs.Duration("since", time.Hour, "how far back to look")
	limit := fs.Int("limit", 10, "how many steps to list")
	htmlOut := fs.String("html", "", "also write a self-contained page with a waterfall chart of each step (FILE.html)")
	queryURL := fs.String("query_url", def.QueryURL, "Jaeger query API base URL (trace.query_url)")
	service := fs.String("service", def.ServiceName, "service.name the nodes traced as (trace.service_name)")
	if code, ok := parseSubFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if !*slow || *limit < 1 || *since <= 0 {
		fmt.Fprintln(stderr, "mgrpo-node traces: give --slow, a --limit of at least 1 and a positive --since")
		return exitUsage
	}
	if *htmlOut != "" {
		if err := checkHTMLOut("--html", *htmlOut); err != nil {
			fmt.Fprintf(stderr, "mgrpo-node traces: %v\n", err)
			return exitUsage
		}
	}
	url := strings.TrimRight(*queryURL, "/")
	traces, err := trace.Slowest(context.Background(), trace.Query{URL: url, Service: *service, Run: *run, Since: *since, Fetch: 1000})
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node traces: %v\n", err)
		return exitFailed
	}
	if len(traces) == 0 {
		fmt.Fprintf(stdout, "no step traces of service %s%s in the last %v at %s\n", *service, forRun(*run), *since, url)
		return exitOK
	}
	traces = traces[:min(*limit, len(traces))]
	for _, t := range traces {
		printTrace(stdout, t, url)
	}
	if *htmlOut != "" {
		err := atomicfile.Write(*htmlOut, func(w io.Writer) error { return trace.WriteHTML(w, traces, url) })
		if err != nil {
			fmt.Fprintf(stderr, "mgrpo-node traces: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "waterfall of %d steps: %s\n", len(traces), *htmlOut)
	}
	return exitOK
}

func forRun(run string) string {
	if run == "" {
		return ""
	}
	return " for run " + run
}

// printTrace prints one step: its time, the stages (the spans the trainer
// made for them and each request to an actor) with node, actor, time and
// share, then the critical path with each span's share of it.
func printTrace(w io.Writer, t trace.StepTrace, url string) {
	total := t.Root.Duration
	share := func(d time.Duration) string { return fmt.Sprintf("%.0f%%", 100*float64(d)/float64(max(total, 1))) }
	mark := ""
	if t.Slow() {
		mark = "  SLOW"
	}
	fmt.Fprintf(w, "step %d  %v%s  run %s  %s/trace/%s\n", t.Step(), total.Round(time.Millisecond), mark, t.Root.Attrs["mgrpo.run"], url, t.ID)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  stage\tnode\tactor\tms\tshare")
	for _, s := range t.Spans[1:] {
		if strings.Contains(s.Name, ".part") || strings.Contains(s.Name, ".function") || strings.HasPrefix(s.Name, "learn.") {
			continue // actors' own spans: the critical path shows them when they matter
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%.1f\t%s\n", s.Name, s.Node, dash(s.Actor), ms(s.Duration), share(s.Duration))
	}
	tw.Flush()
	path := trace.CriticalPath(t)
	fmt.Fprint(w, "  critical path:")
	for _, seg := range path {
		if seg.Duration < total/100 {
			continue // under 1% of the step
		}
		fmt.Fprintf(w, " > %s", seg.Span.Name)
		if seg.Span.Actor != "" {
			fmt.Fprintf(w, " (%s)", seg.Span.Actor)
		}
		fmt.Fprintf(w, " %.1fms %s", ms(seg.Duration), share(seg.Duration))
	}
	l := trace.Largest(path)
	fmt.Fprintf(w, "\n  largest share: %s %s on %s, %s of the step\n\n", l.Span.Name, dash(l.Span.Actor), l.Span.Node, share(l.Duration))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
