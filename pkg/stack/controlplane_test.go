package stack

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testStack is a Stack with nothing running, for testing its parts.
func testStack(t *testing.T) *Stack {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Stack{
		opts:     Options{StateDir: dir, GracePeriod: time.Second, ReadyTimeout: 10 * time.Second, Log: io.Discard},
		sp:       newSpawner(),
		services: map[string][]*process{},
		start:    time.Now(),
	}
	t.Cleanup(s.sp.close)
	return s
}

func TestStartOnFreePorts(t *testing.T) {
	cases := map[string]struct {
		reason       string
		scripts      []string // one per attempt
		wantAttempts int
		wantErr      bool
	}{
		"PortTaken": {
			reason:       "A component that lost its port to another process is started again on other ports.",
			scripts:      []string{"echo 'bind: address already in use'; exit 1", "exec sleep 1000"},
			wantAttempts: 2,
		},
		"OtherFailure": {
			reason:       "Any other failure is returned at once.",
			scripts:      []string{"echo 'bad flag'; exit 1", "exec sleep 1000"},
			wantAttempts: 1,
			wantErr:      true,
		},
		"GivesUp": {
			reason:       "After listenAttempts lost ports, the failure is returned.",
			scripts:      []string{"echo 'address already in use'; exit 1", "echo 'address already in use'; exit 1", "echo 'address already in use'; exit 1", "exec sleep 1000"},
			wantAttempts: listenAttempts,
			wantErr:      true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := testStack(t)
			attempts := 0
			var last *process
			_, err := s.startOnFreePorts(t.Context(), 2, func(ports []int) (*process, error) {
				if len(ports) != 2 || ports[0] == ports[1] {
					t.Errorf("ports %v: want two distinct ports", ports)
				}
				p, err := s.run(procSpec{Name: "component", Path: "/bin/sh", Args: []string{"-c", tc.scripts[attempts]}})
				attempts++
				last = p
				return p, err
			}, func(ctx context.Context, p *process) error {
				return s.waitFor(ctx, "component", p, func(context.Context) error {
					if p.running() && attempts == len(tc.scripts) {
						return nil
					}
					return errors.New("not yet")
				})
			})
			if last != nil {
				defer last.stop(time.Second)
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("%s\nstartOnFreePorts: err %v, want error %v", tc.reason, err, tc.wantErr)
			}
			if attempts != tc.wantAttempts {
				t.Errorf("%s\nstartOnFreePorts: %d attempts, want %d", tc.reason, attempts, tc.wantAttempts)
			}
		})
	}
}
