package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/loomxr/loom/pkg/stack"
)

// Files a detached stack keeps in its state folder.
const (
	devPIDFile    = "loomctl.pid"         // pid of the background supervisor
	devLogFile    = "loomctl.log"         // its output (progress lines)
	devStatusFile = "loomctl-status.json" // written once it is up (or failed)
)

// devStatus is what the background supervisor reports to `dev up --detach`.
type devStatus struct {
	// Up is true once the stack runs; Error is set if start-up failed or
	// the examples' claims did not become Ready (the stack may still run).
	Up         bool   `json:"up"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Error      string `json:"error,omitempty"`
}

// devDetach starts `loomctl dev up --supervise` in a new session and waits
// for its status.
func devDetach(out io.Writer, f *devFlags) error {
	if pid, ok := supervisorPID(f.stateDir); ok {
		return fmt.Errorf("a stack is already running in %s (pid %d); run `loomctl dev down` first", f.stateDir, pid)
	}
	if err := os.MkdirAll(f.stateDir, 0o750); err != nil {
		return fmt.Errorf("cannot create state folder: %w", err)
	}
	statusPath := filepath.Join(f.stateDir, devStatusFile)
	if err := os.Remove(statusPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cannot remove stale status: %w", err)
	}
	logPath := filepath.Join(f.stateDir, devLogFile)
	log, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", logPath, err)
	}
	defer log.Close()
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find loomctl's own binary: %w", err)
	}
	args := []string{"dev", "up", "--supervise",
		"--state-dir=" + f.stateDir,
		"--examples=" + f.examples,
		"--replicas=" + f.replicas,
		"--wait=" + f.wait.String(),
		"--nats-cluster=" + strconv.Itoa(f.natsCluster),
	}
	if f.kubeconfig != "" {
		args = append(args, "--kubeconfig="+f.kubeconfig)
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// A session of its own: no terminal signals, and it outlives us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start the stack in the background: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(out, "starting the stack in the background (pid %d, log %s)\n", cmd.Process.Pid, logPath)

	// The supervisor bounds its own start-up and the wait for claims; this
	// timeout only guards against a supervisor that hangs.
	timeout := time.After(f.wait + 15*time.Minute)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("the stack exited during start-up (%v); last lines of %s:\n%s", err, logPath, tail(logPath, 20))
		case <-timeout:
			return fmt.Errorf("the stack did not report within %s; see %s, and run `loomctl dev down`", f.wait+15*time.Minute, logPath)
		case <-tick.C:
		}
		b, err := os.ReadFile(statusPath)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("cannot read status: %w", err)
		}
		var st devStatus
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("cannot decode status: %w", err)
		}
		if st.Error != "" {
			if st.Up {
				return fmt.Errorf("%s\nthe stack is still running (kubeconfig %s); `loomctl dev down` stops it", st.Error, st.Kubeconfig)
			}
			return fmt.Errorf("the stack failed to start: %s\nsee %s", st.Error, logPath)
		}
		fmt.Fprintf(out, "Loom is up; `loomctl dev down` stops it.\n\n  export KUBECONFIG=%s\n\n", st.Kubeconfig)
		fmt.Fprintln(out, st.Kubeconfig)
		return nil
	}
}

// devSupervise is the background process of --detach: it runs the stack
// like the foreground does, reports through the status file, and stops
// the stack on SIGTERM (`loomctl dev down`).
func devSupervise(f *devFlags) error {
	out := os.Stdout
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	signal.Ignore(syscall.SIGHUP)

	pidPath := filepath.Join(f.stateDir, devPIDFile)
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return fmt.Errorf("cannot write %s: %w", pidPath, err)
	}
	defer os.Remove(pidPath)

	s, err := stack.Start(ctx, f.options(out, nil))
	if err != nil {
		_ = writeStatus(f.stateDir, devStatus{Error: err.Error()})
		return err
	}
	defer stopStack(out, s)
	st := devStatus{Up: true, Kubeconfig: s.AdminKubeconfig()}
	if err := applyExamples(ctx, out, s, f); err != nil {
		st.Error = err.Error()
		fmt.Fprintf(out, "warning: %v\n", err)
	}
	if err := writeStatus(f.stateDir, st); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func writeStatus(dir string, st devStatus) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("cannot encode status: %w", err)
	}
	p := filepath.Join(dir, devStatusFile)
	if err := os.WriteFile(p+".tmp", b, 0o600); err != nil {
		return fmt.Errorf("cannot write status: %w", err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		return fmt.Errorf("cannot write status: %w", err)
	}
	return nil
}

func newDevDownCommand() *cobra.Command {
	var stateDir string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop a stack started with `loomctl dev up --detach`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stateDir == "" {
				wd, err := os.Getwd()
				if err != nil {
					return fmt.Errorf("cannot get working directory: %w", err)
				}
				root, err := stack.FindRepoRoot(wd)
				if err != nil {
					return err
				}
				stateDir = filepath.Join(root, ".loom")
			}
			abs, err := filepath.Abs(stateDir)
			if err != nil {
				return fmt.Errorf("cannot resolve %s: %w", stateDir, err)
			}
			return devDown(cmd.OutOrStdout(), abs, timeout)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "state folder of the stack (default <repo>/.loom)")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long the stack may take to stop before it is killed")
	return cmd
}

// devDown stops the supervisor of stateDir with SIGTERM (SIGKILL after
// timeout), then kills any process of that stack still alive, and returns
// once none is left.
func devDown(out io.Writer, stateDir string, timeout time.Duration) error {
	if pid, ok := supervisorPID(stateDir); ok {
		fmt.Fprintf(out, "stopping the stack in %s (pid %d)\n", stateDir, pid)
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("cannot signal pid %d: %w", pid, err)
		}
		if !waitGone([]int{pid}, timeout) {
			fmt.Fprintf(out, "pid %d did not stop within %s; killing it\n", pid, timeout)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone([]int{pid}, 10*time.Second)
		}
	} else {
		fmt.Fprintf(out, "no stack supervisor running in %s\n", stateDir)
	}
	// The supervisor stops its children, and they die with it anyway
	// (Pdeathsig); this sweep covers everything else that could go wrong.
	left := stackProcesses(stateDir)
	if len(left) > 0 {
		fmt.Fprintf(out, "killing %d leftover processes: %v\n", len(left), left)
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if !waitGone(left, 10*time.Second) {
			return fmt.Errorf("processes of the stack in %s are still running: %v", stateDir, stackProcesses(stateDir))
		}
	}
	fmt.Fprintln(out, "stack stopped")
	return nil
}

// supervisorPID returns the pid in the state folder's pid file if that
// process is alive and is a loomctl supervisor of this state folder.
func supervisorPID(stateDir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(stateDir, devPIDFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	args := cmdline(pid)
	if len(args) == 0 || !containsArg(args, "--supervise") || !mentions(args, stateDir) {
		return 0, false
	}
	return pid, true
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
