package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/loomxr/loom/pkg/stack"
)

func init() { register(newDevCommand) }

// devFlags are the flags of `loomctl dev up`.
type devFlags struct {
	stateDir    string
	examples    string
	replicas    string
	kubeconfig  string
	natsCluster int
	mirror      bool
	wait        time.Duration
	detach      bool
	serviceLogs bool
	// supervise marks the background process `--detach` starts; it is
	// not meant for users.
	supervise bool
}

func newDevCommand() *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Run Loom locally on a real control plane",
	}
	dev.AddCommand(newDevUpCommand(), newDevDownCommand())
	return dev
}

func newDevUpCommand() *cobra.Command {
	f := &devFlags{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start etcd, kube-apiserver, kube-controller-manager, NATS and Loom, and apply the examples",
		Long: `Start a local stack and apply the examples.

In the foreground (the default) the stack runs until Ctrl-C. With --detach,
loomctl starts the stack in the background, returns once it is up and every
claim among the examples is Ready, and prints the admin kubeconfig path;
'loomctl dev down' stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.complete(); err != nil {
				return err
			}
			switch {
			case f.supervise:
				return devSupervise(f)
			case f.detach:
				return devDetach(cmd.OutOrStdout(), f)
			default:
				return devForeground(cmd.OutOrStdout(), f)
			}
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.stateDir, "state-dir", "", "state folder of the stack (default <repo>/.loom)")
	fl.StringVar(&f.examples, "examples", "", "folder of manifests to apply once the stack is up (default <repo>/examples)")
	fl.StringVar(&f.replicas, "replicas", "", "replicas per service, for example renderer=2,binder=3")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "run the services against this existing cluster instead of starting a control plane")
	fl.IntVar(&f.natsCluster, "nats-cluster", 0, "run NATS as a JetStream cluster of this many servers (3 to 5) on loopback; Loom then keeps its streams with three replicas")
	fl.BoolVar(&f.mirror, "mirror", true, "run the state plane: the watcher writes the object mirror and the workers read through it (--mirror=false: every worker read is a GET)")
	fl.DurationVar(&f.wait, "wait", 5*time.Minute, "how long to wait for the examples' claims to become Ready")
	fl.BoolVar(&f.detach, "detach", false, "run the stack in the background and return once it is up and the claims are Ready")
	fl.BoolVar(&f.serviceLogs, "service-logs", true, "echo the services' logs in the foreground (they are always in <state-dir>/logs)")
	fl.BoolVar(&f.supervise, "supervise", false, "run as the background supervisor of --detach")
	_ = fl.MarkHidden("supervise")
	return cmd
}

// complete resolves defaults that depend on the checkout.
func (f *devFlags) complete() error {
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("cannot get working directory: %w", err)
	}
	root, err := stack.FindRepoRoot(wd)
	if err != nil {
		return err
	}
	if f.stateDir == "" {
		f.stateDir = filepath.Join(root, ".loom")
	}
	if f.examples == "" {
		f.examples = filepath.Join(root, "examples")
	}
	for _, p := range []*string{&f.stateDir, &f.examples, &f.kubeconfig} {
		if *p == "" {
			continue
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return fmt.Errorf("cannot resolve %s: %w", *p, err)
		}
	}
	if f.natsCluster < 0 || f.natsCluster == 2 || f.natsCluster > 5 {
		return fmt.Errorf("cannot run a NATS cluster of %d servers: want 3 to 5 (or 0 or 1 for a single server)", f.natsCluster)
	}
	_, err = parseReplicas(f.replicas)
	return err
}

// parseReplicas parses "renderer=2,binder=3".
func parseReplicas(s string) (map[string]int, error) {
	out := map[string]int{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		name, n, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("cannot parse --replicas %q: want service=count[,service=count]", s)
		}
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("cannot parse --replicas %q: %q is not a replica count", s, n)
		}
		known := false
		for _, svc := range stack.DefaultServices {
			known = known || svc == name
		}
		if !known {
			return nil, fmt.Errorf("cannot parse --replicas %q: unknown service %q (known: %s)", s, name, strings.Join(stack.DefaultServices, ", "))
		}
		out[name] = i
	}
	return out, nil
}

// options turns the flags into stack options.
func (f *devFlags) options(log, serviceLog io.Writer) stack.Options {
	replicas, _ := parseReplicas(f.replicas) // validated by complete
	return stack.Options{
		StateDir:    f.stateDir,
		Kubeconfig:  f.kubeconfig,
		Replicas:    replicas,
		NATSServers: f.natsCluster,
		NoMirror:    !f.mirror,
		Log:         log,
		ServiceLog:  serviceLog,
	}
}

// devForeground runs the stack until SIGINT or SIGTERM.
func devForeground(out io.Writer, f *devFlags) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var serviceLog io.Writer
	if f.serviceLogs {
		serviceLog = out
	}
	s, err := stack.Start(ctx, f.options(out, serviceLog))
	if err != nil {
		return err
	}
	defer stopStack(out, s)

	fmt.Fprintf(out, "\nLoom is up. In another shell:\n\n  export KUBECONFIG=%s\n  kubectl get crds\n\nCtrl-C stops the stack.\n\n", s.AdminKubeconfig())
	if err := applyExamples(ctx, out, s, f); err != nil && ctx.Err() == nil {
		fmt.Fprintf(out, "warning: %v (the stack keeps running)\n", err)
	}
	<-ctx.Done()
	// From here on a second Ctrl-C ends loomctl at once; the kernel then
	// kills every process of the stack (Pdeathsig).
	cancel()
	fmt.Fprintln(out, "\nstopping (Ctrl-C again to kill everything at once)")
	return nil
}

// stopStack stops s within a bounded time and reports a failure.
func stopStack(out io.Writer, s *stack.Stack) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		fmt.Fprintf(out, "warning: %v\n", err)
	}
}

// applyExamples applies f.examples, if it holds manifests, and waits up to
// f.wait for every claim among them to be Ready.
func applyExamples(ctx context.Context, out io.Writer, s *stack.Stack, f *devFlags) error {
	objs, err := stack.ReadManifests(f.examples)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(objs) == 0) {
		fmt.Fprintf(out, "no examples in %s\n", f.examples)
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.wait)
	defer cancel()
	applied, err := s.ApplyObjects(ctx, objs...)
	if err != nil {
		return fmt.Errorf("cannot apply the examples in %s: %w", f.examples, err)
	}
	claims, err := s.Claims(ctx, applied)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(claims))
	for _, c := range claims {
		names = append(names, c.GetKind()+" "+c.GetNamespace()+"/"+c.GetName())
	}
	sort.Strings(names)
	fmt.Fprintf(out, "applied %d objects from %s; waiting up to %s for %d claims to be Ready: %s\n",
		len(applied), f.examples, f.wait, len(claims), strings.Join(names, ", "))
	if err := s.WaitReady(ctx, claims); err != nil {
		return fmt.Errorf("the examples' claims did not become Ready within %s: %w", f.wait, err)
	}
	return nil
}
