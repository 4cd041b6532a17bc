//go:build e2e

// Command loombench runs Loom's scale benchmark (package bench) and writes
// its results: bench/results/latest.json and a row per run appended to
// BENCHMARKS.md. `make bench` runs it; `make bench N=5000`, `make bench
// SCALE=1` (renderer and binder at 1 and at 3 replicas, with the ratio) and
// `make bench NATS_CLUSTER=3` (one NATS server and a cluster, with the
// ratio) vary it. With -timeline it prints one claim's requests from the
// audit log of a kept run instead.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loomxr/loom/e2e/bench"
	"github.com/loomxr/loom/pkg/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loombench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		n        = flag.Int("n", 1000, "claims to create")
		creators = flag.Int("creators", 32, "concurrent creators of claims and of the ceiling's NopResources")
		ceiling  = flag.Duration("ceiling", 20*time.Second, "how long to measure the raw ceiling; 0 skips it")
		scale    = flag.Bool("scale", false, "run twice, renderer and binder at 1 and at 3 replicas, and report the ratio")
		cluster  = flag.Int("nats-cluster", 0, "if above 1, run twice, on one NATS server and on a cluster of this many, and report the ratio")
		replicas = flag.String("replicas", "", "replicas of services for a single run, for example renderer=2,binder=2")
		svcFlags = flag.String("service-flags", "", `extra flags of Loom's services for experiments (with -vs, Loom's side only), for example "binder=--kube-qps=500 --kube-burst=1000;secrets=--kube-qps=500"`)
		apiFlags = flag.String("apiserver-flags", "", `extra kube-apiserver flags for experiments, space-separated, for example "--profiling=true"`)
		mirror   = flag.Bool("mirror", true, "run the state plane: the watcher writes the object mirror and the workers read through it (-mirror=false: every worker read is a GET)")
		noAudit  = flag.Bool("no-audit", false, "run the API server without an audit log (requests attributed from its counters only)")
		timeout  = flag.Duration("timeout", 0, "how long to wait for every claim to be Ready (default 10m plus 1s per claim)")
		keep     = flag.Bool("keep", false, "keep the stack's state folder (logs, audit log)")
		out      = flag.String("out", "", "results file (default <repo>/bench/results/latest.json)")
		md       = flag.String("md", "", `Markdown file to append rows to (default <repo>/BENCHMARKS.md; "-" for none)`)
		timeline = flag.String("timeline", "", "instead of running, print every request on objects whose name starts with this (a claim's name) from the audit log given by -audit")
		audit    = flag.String("audit", "", "audit log for -timeline (bench/results/tmp/stack-*/audit/kube-apiserver-audit.log of a run with -keep)")
		vs       = flag.String("vs", "", `"crossplane": instead, run the side-by-side benchmark against upstream Crossplane (-crossplane-dir), writing bench/results/vs-crossplane.json and a row of BENCHMARKS.md`)
		xpDir    = flag.String("crossplane-dir", "", "with -vs crossplane: the folder holding the crossplane binary and its CRDs (make crossplane builds .cache/crossplane/<version>)")
		rounds   = flag.Int("rounds", 2, "with -vs: how many times each engine runs, alternating")
		oneAt    = flag.Int("one-at-a-time", 20, "with -vs: claims created one at a time at rest and during the burst (negative: skip both phases)")
		noBurst  = flag.Bool("no-burst", false, "with -vs: skip the burst phase")
		engines  = flag.String("engines", "crossplane,loom", "with -vs: the engines to run each round, comma-separated (one alone is for diagnosis)")
	)
	flag.Parse()
	if *timeline != "" {
		if *audit == "" {
			return errors.New("-timeline needs -audit")
		}
		return bench.WriteTimeline(os.Stdout, *audit, *timeline)
	}
	extra, err := parseServiceFlags(*svcFlags)
	if err != nil {
		return err
	}
	if *vs != "" {
		return runVS(*vs, *xpDir, *engines, *n, *creators, *rounds, *oneAt, *noBurst, *timeout, *keep, extra, *out, *md)
	}
	if *ceiling == 0 {
		*ceiling = -1
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	repo, err := stack.FindRepoRoot(wd)
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(repo, "bench", "results", "latest.json")
	}
	if *md == "" {
		*md = filepath.Join(repo, "BENCHMARKS.md")
	}
	base, err := parseReplicas(*replicas)
	if err != nil {
		return err
	}

	type variant struct {
		replicas map[string]int
		nats     int
	}
	variants := []variant{{replicas: base}}
	switch {
	case *scale && *cluster > 1:
		return errors.New("-scale and -nats-cluster cannot be combined")
	case *scale:
		variants = []variant{
			{replicas: map[string]int{"renderer": 1, "binder": 1}},
			{replicas: map[string]int{"renderer": 3, "binder": 3}},
		}
	case *cluster > 1:
		variants = []variant{{replicas: base, nats: 1}, {replicas: base, nats: *cluster}}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var results []bench.Result
	for _, v := range variants {
		cfg := bench.Config{
			Claims: *n, Creators: *creators, Ceiling: *ceiling, Replicas: v.replicas, NATSServers: v.nats, NoMirror: !*mirror,
			ServiceFlags: extra, NoAudit: *noAudit, APIServerFlags: strings.Fields(*apiFlags), KeepState: *keep, ReadyTimeout: *timeout, RepoRoot: repo, Log: os.Stderr,
		}
		if v.nats > 1 {
			cfg.Name = fmt.Sprintf("NATS cluster of %d", v.nats)
		}
		res, err := bench.Run(ctx, cfg)
		if err != nil {
			if res != nil {
				failed := filepath.Join(repo, "bench", "results", "tmp", "failed.json")
				if werr := bench.WriteJSON(failed, res); werr == nil {
					fmt.Fprintf(os.Stderr, "loombench: partial results in %s\n", failed)
				}
			}
			return err
		}
		results = append(results, *res)
		if *md != "-" {
			if err := bench.AppendBenchmarksRow(*md, *res); err != nil {
				return err
			}
		}
	}
	rep := bench.Report{Result: results[0]}
	if len(results) > 1 {
		rep.Runs = results
		ratio := 0.0
		if results[0].ClaimsPerS > 0 {
			ratio = results[1].ClaimsPerS / results[0].ClaimsPerS
		}
		ratio = float64(int(ratio*1000+0.5)) / 1000
		if *scale {
			rep.ScaleRatio = ratio
		} else {
			rep.NATSClusterRatio = ratio
		}
	}
	if err := bench.WriteJSON(*out, rep); err != nil {
		return err
	}
	b, err := os.ReadFile(*out)
	if err != nil {
		return err
	}
	os.Stdout.Write(b)
	fmt.Fprintf(os.Stderr, "loombench: wrote %s\n", *out)
	return nil
}

// runVS runs the side-by-side benchmark and writes its results.
func runVS(vs, xpDir, engines string, n, creators, rounds, oneAt int, noBurst bool, timeout time.Duration, keep bool, extra map[string][]string, out, md string) error {
	if vs != bench.EngineCrossplane {
		return fmt.Errorf("cannot compare with %q: only -vs crossplane is known", vs)
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	repo, err := stack.FindRepoRoot(wd)
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join(repo, "bench", "results", "vs-crossplane.json")
	}
	if md == "" {
		md = filepath.Join(repo, "BENCHMARKS.md")
	}
	if xpDir == "" {
		return errors.New("-vs crossplane needs -crossplane-dir (make bench VS=crossplane passes it)")
	}
	if xpDir, err = filepath.Abs(xpDir); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.RunVS(ctx, bench.VSConfig{
		Claims: n, Creators: creators, Rounds: rounds, OneAtATime: oneAt, NoBurst: noBurst, Engines: strings.Split(engines, ","),
		CrossplaneDir: xpDir, RepoRoot: repo, KeepState: keep, ServiceFlags: extra, ReadyTimeout: timeout, Log: os.Stderr,
	})
	if err != nil {
		if rep != nil {
			failed := filepath.Join(repo, "bench", "results", "tmp", "vs-failed.json")
			if werr := bench.WriteJSON(failed, rep); werr == nil {
				fmt.Fprintf(os.Stderr, "loombench: partial results in %s\n", failed)
			}
		}
		return err
	}
	if err := bench.WriteJSON(out, rep); err != nil {
		return err
	}
	if md != "-" {
		if err := bench.AppendVSRow(md, *rep); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	os.Stdout.Write(b)
	fmt.Fprintf(os.Stderr, "loombench: wrote %s\n", out)
	return nil
}

// parseReplicas parses "renderer=2,binder=3".
func parseReplicas(s string) (map[string]int, error) {
	out := map[string]int{}
	if s == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("cannot parse -replicas %q: want service=count[,service=count]", s)
		}
		out[strings.TrimSpace(k)] = n
	}
	return out, nil
}

// parseServiceFlags parses "binder=--a=1 --b=2;secrets=--c=3".
func parseServiceFlags(s string) (map[string][]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string][]string{}
	for _, part := range strings.Split(s, ";") {
		svc, flags, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(svc) == "" {
			return nil, fmt.Errorf("cannot parse -service-flags %q: want service=flags[;service=flags]", s)
		}
		out[strings.TrimSpace(svc)] = strings.Fields(flags)
	}
	return out, nil
}
