package service

import (
	"flag"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/loomxr/loom/pkg/bus"
)

func TestKubeFlags(t *testing.T) {
	cases := map[string]struct {
		reason string
		env    map[string]string
		args   []string
		want   KubeFlags
	}{
		"Defaults": {
			reason: "Without environment or flags, the service's defaults apply.",
			want:   KubeFlags{QPS: 200, Burst: 400},
		},
		"Environment": {
			reason: "The variables carry the service's prefix.",
			env:    map[string]string{"LOOM_TEST_KUBE_QPS": "7.5", "LOOM_TEST_KUBE_BURST": "9", "LOOM_OTHER_KUBE_QPS": "1"},
			want:   KubeFlags{QPS: 7.5, Burst: 9},
		},
		"FlagsWin": {
			reason: "Flags override the environment.",
			env:    map[string]string{"LOOM_TEST_KUBE_QPS": "7"},
			args:   []string{"--kube-qps=3", "--kube-burst=4"},
			want:   KubeFlags{QPS: 3, Burst: 4},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var got KubeFlags
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			got.Register(fs, "LOOM_TEST", 200, 400)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nRegister(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestKubeFlagsConfig(t *testing.T) {
	base := &rest.Config{Host: "https://h", QPS: 1, Burst: 2}
	got := KubeFlags{QPS: 30, Burst: 40}.Config(base)
	if got.Host != "https://h" || got.QPS != 30 || got.Burst != 40 {
		t.Errorf("Config(...): got host %q, QPS %v, burst %d; want the base's host with the flags' limits", got.Host, got.QPS, got.Burst)
	}
	if base.QPS != 1 || base.Burst != 2 {
		t.Errorf("Config(...) changed its base: QPS %v, burst %d", base.QPS, base.Burst)
	}
}

func TestWorkerFlags(t *testing.T) {
	cases := map[string]struct {
		reason  string
		env     map[string]string
		args    []string
		want    WorkerFlags
		wantErr bool
	}{
		"Defaults": {
			reason: "Without environment or flags, the bus's and the service's defaults apply.",
			want: WorkerFlags{
				Bus:         bus.Flags{Replicas: bus.DefaultReplicas, Partitions: bus.DefaultPartitions},
				Scheduling:  bus.SchedulingFlags{FairKey: bus.FairKeyNamespace, TargetBudget: bus.DefaultTargetBudget, Lookahead: bus.DefaultLookahead},
				Concurrency: 16,
				GOGC:        DefaultWorkerGOGC,
			},
		},
		"Environment": {
			reason: "The bus's variables are shared, --concurrency's carries the service's prefix.",
			env: map[string]string{"LOOM_BUS_REPLICAS": "3", "LOOM_BUS_PARTITIONS": "8", "LOOM_FAIR_KEY": "none",
				"LOOM_TARGET_BUDGET": "5", "LOOM_LOOKAHEAD": "256", "LOOM_TEST_CONCURRENCY": "4", "GOGC": "300"},
			want: WorkerFlags{
				Bus:         bus.Flags{Replicas: 3, Partitions: 8},
				Scheduling:  bus.SchedulingFlags{FairKey: "none", TargetBudget: 5, Lookahead: 256},
				Concurrency: 4,
				GOGC:        300,
			},
		},
		"CollectorOff": {
			reason: "GOGC=off, as the Go runtime reads it, turns the collector off.",
			env:    map[string]string{"GOGC": "off"},
			want: WorkerFlags{
				Bus:         bus.Flags{Replicas: bus.DefaultReplicas, Partitions: bus.DefaultPartitions},
				Scheduling:  bus.SchedulingFlags{FairKey: bus.FairKeyNamespace, TargetBudget: bus.DefaultTargetBudget, Lookahead: bus.DefaultLookahead},
				Concurrency: 16,
				GOGC:        -1,
			},
		},
		"FlagsWin": {
			reason: "Flags override the environment.",
			env:    map[string]string{"LOOM_TEST_CONCURRENCY": "4", "LOOM_BUS_PARTITIONS": "8", "GOGC": "300"},
			args:   []string{"--concurrency=2", "--bus-partitions=4", "--bus-replicas=3", "--gogc=150"},
			want: WorkerFlags{
				Bus:         bus.Flags{Replicas: 3, Partitions: 4},
				Scheduling:  bus.SchedulingFlags{FairKey: bus.FairKeyNamespace, TargetBudget: bus.DefaultTargetBudget, Lookahead: bus.DefaultLookahead},
				Concurrency: 2,
				GOGC:        150,
			},
		},
		"InvalidScheduling": {
			reason:  "An invalid scheduling flag is an error from Options.",
			args:    []string{"--fair-key=colour"},
			want:    WorkerFlags{Bus: bus.Flags{Replicas: bus.DefaultReplicas, Partitions: bus.DefaultPartitions}, Scheduling: bus.SchedulingFlags{FairKey: "colour", TargetBudget: bus.DefaultTargetBudget, Lookahead: bus.DefaultLookahead}, Concurrency: 16, GOGC: DefaultWorkerGOGC},
			wantErr: true,
		},
		"LookaheadBeyondAckPending": {
			reason:  "A lookahead the consumers' MaxAckPending cannot deliver is an error from Options.",
			args:    []string{"--lookahead=1001"},
			want:    WorkerFlags{Bus: bus.Flags{Replicas: bus.DefaultReplicas, Partitions: bus.DefaultPartitions}, Scheduling: bus.SchedulingFlags{FairKey: bus.FairKeyNamespace, TargetBudget: bus.DefaultTargetBudget, Lookahead: 1001}, Concurrency: 16, GOGC: DefaultWorkerGOGC},
			wantErr: true,
		},
		"NoLookahead": {
			reason:  "A lookahead below one would pull nothing: an error from Options.",
			args:    []string{"--lookahead=0"},
			want:    WorkerFlags{Bus: bus.Flags{Replicas: bus.DefaultReplicas, Partitions: bus.DefaultPartitions}, Scheduling: bus.SchedulingFlags{FairKey: bus.FairKeyNamespace, TargetBudget: bus.DefaultTargetBudget}, Concurrency: 16, GOGC: DefaultWorkerGOGC},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var got WorkerFlags
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			got.Register(fs, "LOOM_TEST", 16)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nRegister(...): -want, +got:\n%s", tc.reason, diff)
			}
			// Options sets the process's collector: give the test binary
			// its own setting back.
			prev := debug.SetGCPercent(100)
			t.Cleanup(func() { debug.SetGCPercent(prev) })
			opts, err := got.Options()
			if (err != nil) != tc.wantErr {
				t.Errorf("\n%s\nOptions(): got error %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if err == nil && len(opts) == 0 {
				t.Errorf("\n%s\nOptions(): no options", tc.reason)
			}
			if applied := debug.SetGCPercent(100); err == nil && applied != tc.want.GOGC {
				t.Errorf("\n%s\nOptions(): the collector's target is %d, want %d", tc.reason, applied, tc.want.GOGC)
			}
		})
	}
}

func TestEnvString(t *testing.T) {
	cases := map[string]struct {
		reason string
		set    bool
		value  string
		want   string
	}{
		"Unset": {reason: "An unset variable is the default.", want: "def"},
		"Empty": {reason: "An empty variable is the default too.", set: true, want: "def"},
		"Set":   {reason: "A set variable is its value.", set: true, value: "v", want: "v"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.set {
				t.Setenv("LOOM_TEST_STRING", tc.value)
			}
			if got := EnvString("LOOM_TEST_STRING", "def"); got != tc.want {
				t.Errorf("\n%s\nEnvString(...): got %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}
