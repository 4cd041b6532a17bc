//go:build e2e

// Command loomobserve starts a local stack watched by Prometheus and Jaeger
// (package observe), puts a load on it, checks every query of the shipped
// dashboard and one healthy and one broken claim's trace, optionally draws
// each dashboard row's main series as PNGs, and then leaves everything up,
// with the URLs printed, until Ctrl-C. `make observe` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/loomxr/loom/e2e/observe"
	"github.com/loomxr/loom/pkg/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loomobserve:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		n        = flag.Int("n", 300, "claims to create (one in every 20 of each broken kind: fatal function, unreachable function, bad patch)")
		creators = flag.Int("creators", 8, "concurrent creators of claims")
		scrape   = flag.Duration("scrape", 2*time.Second, "Prometheus's scrape interval")
		pngs     = flag.String("png", "", "folder to draw each dashboard row's main series into (PNG), with panels.md; empty: none")
		exit     = flag.Bool("exit", false, "stop once the checks are done instead of waiting for Ctrl-C")
		verbose  = flag.Bool("v", false, "print the stack's progress")
	)
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := stack.FindRepoRoot(".")
	if err != nil {
		return err
	}
	cfg := observe.Config{RepoRoot: root, ScrapeInterval: *scrape, Log: os.Stdout}
	if *verbose {
		cfg.StackLog = os.Stdout
	}
	t0 := time.Now()
	s, err := observe.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping")
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.Stop(sctx)
	}()
	fmt.Printf("stack, Prometheus and Jaeger up in %s\n", time.Since(t0).Round(time.Second))

	checks, cerr := s.RunChecks(ctx, *n, *creators)
	fmt.Println()
	fmt.Print(observe.Report(checks.Dashboard))
	if *pngs != "" && len(checks.Dashboard) > 0 {
		dir, _ := filepath.Abs(*pngs)
		files, err := observe.WritePNGs(dir, checks.Dashboard, checks.Load.Start)
		if err != nil {
			return err
		}
		if err := observe.WriteReport(dir, checks.Dashboard); err != nil {
			return err
		}
		fmt.Printf("\nwrote %d pictures and panels.md into %s\n", len(files), dir)
	}
	if cerr != nil {
		fmt.Printf("\nCHECKS FAILED:\n%v\n", cerr)
	} else {
		fmt.Printf("\nall checks passed: %d dashboard queries returned series; healthy claim %s's trace %s spans %v; broken claim %s's trace %s marks %v\n",
			len(checks.Dashboard), checks.Healthy.Claim.Name, checks.Healthy.TraceID, checks.Healthy.Services,
			checks.Broken.Claim.Name, checks.Broken.TraceID, checks.Broken.Errors)
	}
	if *exit {
		return cerr
	}
	fmt.Printf(`
Watching Loom (Ctrl-C stops everything):
  Prometheus API   %[1]s/api/v1/query?query=loom_bus_consumer_pending
  Prometheus       %[1]s  (targets: %[1]s/api/v1/targets)
  Jaeger           %[2]s/search?service=watcher
  Jaeger API       %[2]s/api/traces/%[3]s   (healthy claim %[4]s)
                   %[2]s/api/traces/%[5]s   (broken claim %[6]s)
  kubectl          KUBECONFIG=%[7]s bin/kubectl get observedbs -n observe
`, s.PrometheusURL, s.JaegerURL, checks.Healthy.TraceID, checks.Healthy.Claim.Name, checks.Broken.TraceID, checks.Broken.Claim.Name, s.Stack.AdminKubeconfig())
	<-ctx.Done()
	return cerr
}
