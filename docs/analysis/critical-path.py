#!/usr/bin/env python3
"""Where a training step's time goes, from the spans of traced runs.

Usage: docs/analysis/critical-path.py LABEL=SPANS[,SPANS...] [LABEL=SPANS...]

Each SPANS is a file a run wrote with --trace.file (every step sampled:
--trace.sample_ratio 1); a run of several processes may name each one's
file. For each run it prints the medians over its steps (the first two left
out: start-up) of when each milestone on a step's critical path came, in ms
from the start of the step's root span, side by side, so that a run of
three processes can be read against --role all. docs/cluster-bench.sh runs
it with TRACE=1.
"""
import collections
import json
import statistics
import sys
from datetime import datetime


def when(stamp):
    """Seconds since the epoch of an RFC 3339 time with nanoseconds."""
    day, _, frac = stamp.rstrip("Z").partition(".")
    t = datetime.fromisoformat(day + "+00:00").timestamp()
    return t + float("0." + frac) if frac else t


def load(paths):
    """The spans of paths, one dict each: name, trace, id, parent, start, end."""
    spans = {}
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            s = {"name": r["Name"], "trace": r["SpanContext"]["TraceID"], "id": r["SpanContext"]["SpanID"],
                 "parent": r["Parent"]["SpanID"], "start": when(r["StartTime"]), "end": when(r["EndTime"])}
            spans[s["id"]] = s  # a span written by two processes counts once
    return list(spans.values())


def milestones(spans):
    """Per step (in order): milestone name -> ms from the step's start."""
    by_trace = collections.defaultdict(list)
    for s in spans:
        by_trace[s["trace"]].append(s)
    steps = []
    for trace in by_trace.values():
        root = [s for s in trace if s["name"] == "step"]
        if len(root) != 1:
            continue
        t0 = root[0]["start"]
        ms = lambda t: 1e3 * (t - t0)
        named = collections.defaultdict(list)
        for s in trace:
            named[s["name"]].append(s)
        children = collections.defaultdict(list)
        for s in trace:
            children[s["parent"]].append(s)
        m = {"step ends": ms(root[0]["end"])}
        gen = named["generate.part"]
        if gen:
            m["first part starts generating"] = ms(min(s["start"] for s in gen))
            m["last part generated"] = ms(max(s["end"] for s in gen))
        hops, backs, outs = [], [], []
        for req in sorted(named["generator.request"], key=lambda s: s["start"]):
            kids = {s["name"]: s for s in children[req["id"]]}
            g, w, r = kids.get("generate.part"), kids.get("reward.part"), kids.get("reference.part")
            if g and not outs:
                outs.append(1e3 * (g["start"] - req["start"]))
            if g and w:
                hops.append(1e3 * (w["start"] - g["end"]))
            if r:
                backs.append(1e3 * (req["end"] - r["end"]))
        if outs:
            m["part 0: asked -> generating"] = outs[0]
        if hops:
            m["a part: generated -> its rewards start"] = statistics.median(hops)
        if named["reference.part"]:
            m["last reference log-probs"] = ms(max(s["end"] for s in named["reference.part"]))
        if backs:
            m["a part: reference log-probs -> answer at the learner"] = statistics.median(backs)
        for name, label in (("prepare", "prepare starts"), ("learn", "learn starts")):
            if named[name]:
                m[label] = ms(min(s["start"] for s in named[name]))
        if named["learn"]:
            m["learn (duration)"] = 1e3 * statistics.median(s["end"] - s["start"] for s in named["learn"])
        if named["publish"]:
            m["publish starts"] = ms(named["publish"][0]["start"])
            m["_publish"] = named["publish"][0]["start"]
        acks = named["publish.generator"]
        if acks and named["publish"]:
            m["weights acknowledged (after publish starts)"] = 1e3 * (max(s["end"] for s in acks) - named["publish"][0]["start"])
        taken = named["weights"]  # on the generator nodes (a version fetched ahead is taken as its offer comes)
        if taken and named["publish"]:
            m["weights in use at the generator nodes (after publish starts)"] = 1e3 * (max(s["end"] for s in taken) - named["publish"][0]["start"])
        m["_start"], m["_first_gen"] = t0, min((s["start"] for s in gen), default=None)
        steps.append(m)
    steps.sort(key=lambda m: m["_start"])
    for prev, m in zip(steps, steps[1:]):  # the new weights' wait: published in one step, sampled in the next
        if "_publish" in prev and m["_first_gen"] is not None:
            m["published -> next step generating"] = 1e3 * (m["_first_gen"] - prev["_publish"])
    return steps[2:]


ORDER = ["part 0: asked -> generating", "first part starts generating", "last part generated",
         "a part: generated -> its rewards start", "last reference log-probs",
         "a part: reference log-probs -> answer at the learner", "prepare starts", "learn starts",
         "learn (duration)", "publish starts", "weights in use at the generator nodes (after publish starts)",
         "weights acknowledged (after publish starts)",
         "published -> next step generating", "step ends"]


def main(args):
    if not args or any("=" not in a for a in args):
        sys.exit("usage: critical-path.py LABEL=SPANS[,SPANS...] ...")
    runs = []
    for a in args:
        label, paths = a.split("=", 1)
        try:
            steps = milestones(load(paths.split(",")))
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"critical-path: {paths}: {e}")
        runs.append((label, steps))
    print("| median, ms from the step's start (" + ", ".join(f"{l}: {len(s)} steps" for l, s in runs) + ") | "
          + " | ".join(l for l, _ in runs) + " |")
    print("| --- |" + " --- |" * len(runs))
    for row in ORDER:
        cells = []
        for _, steps in runs:
            xs = [m[row] for m in steps if row in m]
            cells.append(f"{statistics.median(xs):.2f}" if xs else "")
        if any(cells):
            print(f"| {row} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
