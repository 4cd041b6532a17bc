package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/stack"
)

func init() { register(newDLQCommand) }

// dlqFlags are the flags every `loomctl dlq` subcommand shares.
type dlqFlags struct {
	natsURL  string
	stateDir string
	service  string
	timeout  time.Duration
}

func newDLQCommand() *cobra.Command {
	f := &dlqFlags{}
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect and replay the bus's dead letters",
		Long: `Inspect and replay the bus's dead letters: events a service gave up on,
because its handler failed permanently, failed MaxDeliver times, or could not
decode them.

The NATS URL comes from --nats-url, else $LOOM_NATS_URL, else the local
stack's state (<state-dir>/stack.json, written by 'loomctl dev up').`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.natsURL, "nats-url", "", "NATS server URL(s), comma-separated (default $LOOM_NATS_URL, else the local stack's)")
	pf.StringVar(&f.stateDir, "state-dir", "", "state folder of the local stack, to find its NATS URL (default <repo>/.loom)")
	pf.StringVar(&f.service, "service", "", "only this service's dead letters: "+strings.Join(bus.Services, ", "))
	pf.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long the command may take")
	cmd.AddCommand(newDLQListCommand(f), newDLQReplayCommand(f))
	return cmd
}

func newDLQListCommand(f *dlqFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" && output != "table" {
				return fmt.Errorf("unknown output format %q: want table or json", output)
			}
			return f.run(cmd.Context(), func(ctx context.Context, js jetstream.JetStream) error {
				dls, err := bus.ListDeadLetters(ctx, js, f.service)
				if err != nil {
					return err
				}
				if output == "json" {
					return printDeadLettersJSON(cmd.OutOrStdout(), dls)
				}
				return printDeadLetters(cmd.OutOrStdout(), dls)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func newDLQReplayCommand(f *dlqFlags) *cobra.Command {
	var (
		seq uint64
		all bool
	)
	cmd := &cobra.Command{
		Use:   "replay (--seq N | --all)",
		Short: "Re-publish dead letters to the subjects they came from, then delete them",
		Long: `Re-publish dead letters to the work subjects they came from, as fresh
events, then delete them from the dead-letter stream. --all replays every dead
letter (of --service, if given); --seq replays one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (seq == 0) == !all {
				return errors.New("give exactly one of --seq N and --all")
			}
			return f.run(cmd.Context(), func(ctx context.Context, js jetstream.JetStream) error {
				seqs := []uint64{seq}
				if all {
					dls, err := bus.ListDeadLetters(ctx, js, f.service)
					if err != nil {
						return err
					}
					seqs = seqs[:0]
					for _, d := range dls {
						seqs = append(seqs, d.Seq)
					}
				} else if f.service != "" {
					d, err := bus.GetDeadLetter(ctx, js, seq)
					if err != nil {
						return err
					}
					if d.Service != f.service {
						return fmt.Errorf("dead letter %d belongs to service %s, not %s", seq, d.Service, f.service)
					}
				}
				out := cmd.OutOrStdout()
				for _, s := range seqs {
					d, err := bus.ReplayDeadLetter(ctx, js, s)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "replayed %d (%s %s) to %s\n", d.Seq, d.Service, targetString(d), d.Subject)
				}
				if len(seqs) == 0 {
					fmt.Fprintln(out, "no dead letters")
				}
				return nil
			})
		},
	}
	cmd.Flags().Uint64Var(&seq, "seq", 0, "sequence of the dead letter to replay (see 'loomctl dlq list')")
	cmd.Flags().BoolVar(&all, "all", false, "replay every dead letter")
	return cmd
}

// run connects to NATS and calls do with a JetStream context.
func (f *dlqFlags) run(ctx context.Context, do func(context.Context, jetstream.JetStream) error) error {
	if f.service != "" && !isBusService(f.service) {
		return fmt.Errorf("unknown service %q: want one of %s", f.service, strings.Join(bus.Services, ", "))
	}
	url, err := f.url()
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	nc, err := nats.Connect(url, nats.Name("loomctl"), nats.Timeout(min(f.timeout, 10*time.Second)))
	if err != nil {
		return fmt.Errorf("cannot connect to NATS at %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("cannot use JetStream: %w", err)
	}
	return do(ctx, js)
}

// url finds the NATS URL: the flag, the environment, or the local stack.
func (f *dlqFlags) url() (string, error) {
	if f.natsURL != "" {
		return f.natsURL, nil
	}
	if u := os.Getenv("LOOM_NATS_URL"); u != "" {
		return u, nil
	}
	dir := f.stateDir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("cannot get working directory: %w", err)
		}
		root, err := stack.FindRepoRoot(wd)
		if err != nil {
			return "", fmt.Errorf("no NATS URL: set --nats-url or LOOM_NATS_URL (%v)", err)
		}
		dir = filepath.Join(root, ".loom")
	}
	info, err := stack.ReadInfo(dir)
	if err != nil || info.NATSURL == "" {
		return "", fmt.Errorf("no NATS URL: set --nats-url or LOOM_NATS_URL, or start the local stack with 'loomctl dev up' (%v)", err)
	}
	return info.NATSURL, nil
}

func isBusService(s string) bool {
	for _, x := range bus.Services {
		if s == x {
			return true
		}
	}
	return false
}

// targetString names a dead letter's target as kind namespace/name (uid).
func targetString(d bus.DeadLetter) string {
	t := d.Target
	if t == nil {
		return "<undecodable>"
	}
	name := t.GetName()
	if t.GetNamespace() != "" {
		name = t.GetNamespace() + "/" + name
	}
	kind := t.GetKind()
	if t.GetGroup() != "" {
		kind += "." + t.GetGroup()
	}
	return fmt.Sprintf("%s %s (%s)", kind, name, t.GetUid())
}

func printDeadLetters(w io.Writer, dls []bus.DeadLetter) error {
	if len(dls) == 0 {
		_, err := fmt.Fprintln(w, "no dead letters")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tSERVICE\tTARGET\tDELIVERIES\tFAILED AT\tREASON")
	for _, d := range dls {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", d.Seq, d.Service, targetString(d), d.Deliveries,
			d.FailedAt.UTC().Format(time.RFC3339), d.Reason)
	}
	return tw.Flush()
}

// deadLetterJSON is the JSON form of a dead letter.
type deadLetterJSON struct {
	Seq        uint64      `json:"seq"`
	Service    string      `json:"service"`
	Subject    string      `json:"subject"`
	Target     *targetJSON `json:"target"`
	Reason     string      `json:"reason"`
	Deliveries int         `json:"deliveries"`
	FailedAt   time.Time   `json:"failedAt"`
}

type targetJSON struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	UID       string `json:"uid"`
}

func printDeadLettersJSON(w io.Writer, dls []bus.DeadLetter) error {
	out := make([]deadLetterJSON, 0, len(dls))
	for _, d := range dls {
		j := deadLetterJSON{Seq: d.Seq, Service: d.Service, Subject: d.Subject, Reason: d.Reason,
			Deliveries: d.Deliveries, FailedAt: d.FailedAt.UTC()}
		if t := d.Target; t != nil {
			j.Target = &targetJSON{Group: t.GetGroup(), Version: t.GetVersion(), Kind: t.GetKind(),
				Namespace: t.GetNamespace(), Name: t.GetName(), UID: t.GetUid()}
		}
		out = append(out, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
