package stack

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomxr/loom/pkg/testing/poll"
)

// marker returns a sleep duration no other process on the machine uses, so
// the test can find its processes in /proc.
func marker() string { return strconv.Itoa(900000 + rand.IntN(99999)) }

// pidsWith returns the live, non-zombie processes whose command line has
// arg.
func pidsWith(arg string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		for _, a := range bytes.Split(b, []byte{0}) {
			if string(a) == arg {
				stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
				if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] != 'Z' {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	return pids
}

func testSpec(t *testing.T, script string, restart bool) procSpec {
	return procSpec{
		Name:    "test",
		Path:    "/bin/sh",
		Args:    []string{"-c", script},
		LogPath: filepath.Join(t.TempDir(), "test.log"),
		Restart: restart,
	}
}

func TestProcessStop(t *testing.T) {
	cases := map[string]struct {
		reason   string
		script   string
		grace    time.Duration
		maxTaken time.Duration
	}{
		"GrandchildrenGo": {
			reason:   "Stopping a process ends its whole process group, grandchildren included.",
			script:   "sleep %[1]s & sleep %[1]s & wait",
			grace:    5 * time.Second,
			maxTaken: 4 * time.Second,
		},
		"SIGTERMIgnored": {
			reason:   "A process that ignores SIGTERM is killed after the grace period.",
			script:   "trap '' TERM; sleep %[1]s & sleep %[1]s & wait; wait",
			grace:    300 * time.Millisecond,
			maxTaken: 4 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sp := newSpawner()
			defer sp.close()
			m := marker()
			p, err := startProcess(sp, testSpec(t, fmt.Sprintf(tc.script, m), false), t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			poll.Until(t, 5*time.Second, func() error {
				if n := len(pidsWith(m)); n != 2 {
					return fmt.Errorf("%d sleeps running, want 2", n)
				}
				return nil
			})
			start := time.Now()
			p.stop(tc.grace)
			if took := time.Since(start); took > tc.maxTaken {
				t.Errorf("%s\nstop took %s, want at most %s", tc.reason, took, tc.maxTaken)
			}
			// A killed process may take a moment to become a zombie; a
			// process that survives SIGKILL for seconds is a real leak.
			poll.Until(t, 3*time.Second, func() error {
				if left := pidsWith(m); len(left) > 0 {
					return fmt.Errorf("%s\nprocesses left after stop: %v", tc.reason, left)
				}
				return nil
			})
			if p.running() {
				t.Errorf("%s\nrunning() after stop: want false", tc.reason)
			}
		})
	}
}

func TestProcessRestart(t *testing.T) {
	sp := newSpawner()
	defer sp.close()
	m := marker()
	var logs strings.Builder
	p, err := startProcess(sp, testSpec(t, "exec sleep "+m, true), func(f string, a ...any) { fmt.Fprintf(&logs, f+"\n", a...) })
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop(time.Second)
	first := p.pid()
	if err := p.kill(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if pid := p.pid(); pid == 0 || pid == first {
			return fmt.Errorf("not restarted yet (pid %d, first %d)", pid, first)
		}
		return nil
	})
	p.stop(time.Second)
	if left := pidsWith(m); len(left) > 0 {
		t.Errorf("processes left after stop: %v", left)
	}
}

func TestProcessExitUnsupervised(t *testing.T) {
	sp := newSpawner()
	defer sp.close()
	var logs strings.Builder
	p, err := startProcess(sp, testSpec(t, "echo bye; exit 3", false), func(f string, a ...any) { fmt.Fprintf(&logs, f+"\n", a...) })
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, func() error {
		if p.running() {
			return errors.New("still running")
		}
		return nil
	})
	p.stop(time.Second)
	if !strings.Contains(logs.String(), "exit status 3") {
		t.Errorf("progress %q: want the exit status named", logs.String())
	}
	if got := p.tail(1); got != "bye" {
		t.Errorf("tail(1): got %q, want %q", got, "bye")
	}
}

func TestProcessStartFails(t *testing.T) {
	sp := newSpawner()
	defer sp.close()
	spec := testSpec(t, "", false)
	spec.Path = filepath.Join(t.TempDir(), "missing")
	if _, err := startProcess(sp, spec, t.Logf); err == nil {
		t.Error("startProcess(missing binary): want error, got nil")
	}
}

// TestMain lets the test binary act as a harness for TestChildrenDieWithHarness.
func TestMain(m *testing.M) {
	if arg := os.Getenv("LOOM_TEST_HARNESS_SLEEP"); arg != "" {
		sp := newSpawner()
		spec := procSpec{Name: "sleep", Path: "/bin/sh", Args: []string{"-c", "exec sleep " + arg}, LogPath: os.Getenv("LOOM_TEST_HARNESS_LOG")}
		if _, err := startProcess(sp, spec, func(string, ...any) {}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		// Churn goroutines and threads: Pdeathsig must not fire when the
		// runtime retires threads, only when the harness dies.
		for range 50 {
			go func() { time.Sleep(time.Millisecond) }()
		}
		select {}
	}
	os.Exit(m.Run())
}

func TestChildrenDieWithHarness(t *testing.T) {
	m := marker()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOOM_TEST_HARNESS_SLEEP="+m, "LOOM_TEST_HARNESS_LOG="+filepath.Join(t.TempDir(), "log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if len(pidsWith(m)) != 1 {
			return errors.New("child not running yet")
		}
		return nil
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	poll.Until(t, 5*time.Second, func() error {
		if left := pidsWith(m); len(left) > 0 {
			return fmt.Errorf("child outlived the harness: %v", left)
		}
		return nil
	})
}
