package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseReplicas(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   map[string]int
		err    bool
	}{
		"Empty":    {reason: "No flag means no overrides.", in: "", want: map[string]int{}},
		"Several":  {reason: "Comma-separated pairs, spaces allowed.", in: "renderer=2, binder=3", want: map[string]int{"renderer": 2, "binder": 3}},
		"Zero":     {reason: "Zero replicas is allowed (the service does not run).", in: "watcher=0", want: map[string]int{"watcher": 0}},
		"Unknown":  {reason: "Unknown services are rejected.", in: "nope=1", err: true},
		"NotCount": {reason: "Counts are non-negative integers.", in: "binder=-1", err: true},
		"NoEquals": {reason: "Each entry needs a count.", in: "binder", err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseReplicas(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("%s\nparseReplicas(%q): err %v, want error %v", tc.reason, tc.in, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); !tc.err && diff != "" {
				t.Errorf("%s\nparseReplicas(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

func TestMentions(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		want   bool
	}{
		"FlagValue":  {reason: "A flag whose value is inside the folder.", args: []string{"etcd", "--data-dir=/s/etcd"}, want: true},
		"Argument":   {reason: "A plain argument equal to the folder.", args: []string{"loomctl", "--state-dir", "/s"}, want: true},
		"Prefix":     {reason: "A sibling folder with the same prefix is not inside.", args: []string{"etcd", "--data-dir=/s2/etcd"}, want: false},
		"Unrelated":  {reason: "No mention at all.", args: []string{"sleep", "1"}, want: false},
		"InsideFlag": {reason: "A flag without = is not split.", args: []string{"x", "-f/s/a"}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := mentions(tc.args, "/s"); got != tc.want {
				t.Errorf("%s\nmentions(%q): got %v, want %v", tc.reason, tc.args, got, tc.want)
			}
		})
	}
}

func TestAlive(t *testing.T) {
	if !alive(os.Getpid()) {
		t.Error("alive(self): want true")
	}
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if alive(cmd.Process.Pid) {
		t.Error("alive(reaped process): want false")
	}
}

func TestNATSClusterFlag(t *testing.T) {
	cases := map[string]struct {
		reason string
		n      int
		err    bool
	}{
		"Default": {reason: "Zero runs a single server.", n: 0},
		"One":     {reason: "One runs a single server.", n: 1},
		"Two":     {reason: "Two servers cannot keep a quorum when one goes; refused.", n: 2, err: true},
		"Three":   {reason: "Three servers form a cluster.", n: 3},
		"Six":     {reason: "More than five is refused.", n: 6, err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &devFlags{natsCluster: tc.n, stateDir: t.TempDir()}
			err := f.complete()
			if (err != nil) != tc.err {
				t.Fatalf("%s\ncomplete() with --nats-cluster=%d: err %v, want error %v", tc.reason, tc.n, err, tc.err)
			}
			if tc.err {
				return
			}
			if got := f.options(nil, nil).NATSServers; got != tc.n {
				t.Errorf("%s\noptions().NATSServers: got %d, want %d", tc.reason, got, tc.n)
			}
		})
	}
}
