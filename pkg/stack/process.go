package stack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// procSpec describes one program the stack runs.
type procSpec struct {
	// Name identifies the process in progress lines and log prefixes, for
	// example "etcd" or "renderer-0".
	Name string
	Path string
	Args []string
	// Env is appended to the harness's own environment.
	Env []string
	// LogPath receives the process's stdout and stderr, appended across
	// restarts.
	LogPath string
	// Echo, if not nil, also receives every output line prefixed with Name.
	Echo io.Writer
	// Restart makes the process supervised: when it exits without being
	// asked to, it is started again with exponential backoff.
	Restart bool
}

// errStopping is returned by launch once stop has been called.
var errStopping = errors.New("process is stopping")

// process runs a procSpec in its own process group and, if asked, keeps it
// running. Its children die with the harness (Pdeathsig) and its whole
// process group is signalled on stop, so nothing it starts outlives it.
type process struct {
	spec procSpec
	sp   *spawner
	logf func(format string, args ...any)
	log  *os.File
	out  io.Writer

	mu       sync.Mutex
	cmd      *exec.Cmd
	stopping bool
	restarts int

	stopCh   chan struct{}
	loopDone chan struct{}
}

// startProcess launches spec and returns once the program has been
// exec'ed (not once it is ready). If spec.Restart is set, a goroutine
// restarts it whenever it exits until stop is called.
func startProcess(sp *spawner, spec procSpec, logf func(string, ...any)) (*process, error) {
	f, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open log of %s: %w", spec.Name, err)
	}
	p := &process{
		spec:     spec,
		sp:       sp,
		logf:     logf,
		log:      f,
		out:      f,
		stopCh:   make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	if spec.Echo != nil {
		p.out = io.MultiWriter(f, &prefixWriter{prefix: spec.Name + " | ", w: spec.Echo})
	}
	first := make(chan error, 1)
	go p.loop(first)
	if err := <-first; err != nil {
		<-p.loopDone
		_ = f.Close()
		return nil, err
	}
	return p, nil
}

// loop launches the program and, for supervised processes, relaunches it
// after each unrequested exit. It reports the first launch on first.
func (p *process) loop(first chan<- error) {
	defer close(p.loopDone)
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 200 * time.Millisecond
	bo.MaxInterval = 10 * time.Second
	bo.MaxElapsedTime = 0
	for {
		cmd, err := p.launch()
		if first != nil {
			first <- err
			first = nil
			if err != nil {
				return
			}
		}
		if errors.Is(err, errStopping) {
			return
		}
		if err != nil {
			p.logf("%s failed to start: %v", p.spec.Name, err)
		} else {
			started := time.Now()
			werr := cmd.Wait()
			p.mu.Lock()
			p.cmd = nil
			stopping := p.stopping
			p.mu.Unlock()
			if stopping {
				return
			}
			if !p.spec.Restart {
				p.logf("%s exited unexpectedly (%s); see %s", p.spec.Name, exitReason(werr), p.spec.LogPath)
				return
			}
			if time.Since(started) > 30*time.Second {
				bo.Reset()
			}
			p.logf("%s exited (%s); restarting", p.spec.Name, exitReason(werr))
		}
		select {
		case <-time.After(bo.NextBackOff()):
		case <-p.stopCh:
			return
		}
		p.mu.Lock()
		p.restarts++
		p.mu.Unlock()
	}
}

// launch starts one run of the program unless stop has been called.
func (p *process) launch() (*exec.Cmd, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return nil, errStopping
	}
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Env = append(os.Environ(), p.spec.Env...)
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	cmd.WaitDelay = 2 * time.Second
	// Own process group: stop signals the whole group, so grandchildren go
	// too. Pdeathsig: the kernel kills the child if the harness dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(p.log, "=== %s: starting %s %s\n", time.Now().Format(time.RFC3339), p.spec.Path, strings.Join(p.spec.Args, " "))
	if err := p.sp.start(cmd); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", p.spec.Name, err)
	}
	p.cmd = cmd
	return cmd, nil
}

// pid returns the process id of the current run, or 0 if it is not running.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// running reports whether the program is running or will be restarted.
func (p *process) running() bool {
	select {
	case <-p.loopDone:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the current run's process group without stopping
// supervision: a supervised process is started again.
func (p *process) kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("cannot kill %s: not running", p.spec.Name)
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("cannot kill %s: %w", p.spec.Name, err)
	}
	return nil
}

// stop ends supervision, sends SIGTERM to the process group, and SIGKILL
// after grace. It returns once the program has exited; calling it again is
// harmless.
func (p *process) stop(grace time.Duration) {
	p.mu.Lock()
	if !p.stopping {
		p.stopping = true
		close(p.stopCh)
	}
	pgid := 0
	if p.cmd != nil && p.cmd.Process != nil {
		pgid = p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
	}
	p.mu.Unlock()

	select {
	case <-p.loopDone:
	case <-time.After(grace):
		p.logf("%s did not stop within %s; killing it", p.spec.Name, grace)
		if pgid != 0 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		<-p.loopDone
	}
	// The leader is gone; anything it left in its group goes now. SIGKILL
	// is delivered asynchronously, so wait (briefly) until the group is
	// empty: callers count on its ports and files being free on return.
	if pgid != 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		waitGroupGone(pgid, 2*time.Second)
	}
	_ = p.log.Close()
}

// waitGroupGone polls until no process of group pgid can be signalled, or
// limit passes. Zombies still count, until their new parent reaps them.
func waitGroupGone(pgid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
			return
		}
		time.Sleep(10 * time.Millisecond) //nolint:forbidigo // Polls another process group's liveness; there is nothing to wait on.
	}
}

// tail returns the last lines of the process's log, for error messages.
func (p *process) tail(lines int) string {
	return tailFile(p.spec.LogPath, lines)
}

func tailFile(path string, lines int) string {
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

func exitReason(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// spawner starts child processes from one goroutine locked to its OS thread.
// Pdeathsig fires when the *thread* that forked a child exits, and the Go
// runtime may retire threads; forking from one long-lived locked thread
// makes "the child dies with the harness" hold exactly. The thread exits,
// killing any child still alive, only when the spawner is closed.
type spawner struct {
	reqs chan spawnReq
	once sync.Once
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq)}
	started := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		// Never unlocked: when this goroutine returns, its thread exits.
		close(started)
		for r := range s.reqs {
			r.done <- r.cmd.Start()
		}
	}()
	<-started
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	s.reqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}

// close ends the spawner's thread. Call it only after every child stopped.
func (s *spawner) close() { s.once.Do(func() { close(s.reqs) }) }

// prefixWriter writes each complete line to w with a prefix. Writes to w
// are serialised by the shared lock so lines of different processes never
// interleave.
type prefixWriter struct {
	prefix string
	w      io.Writer
	buf    []byte
}

var echoMu sync.Mutex //nolint:gochecknoglobals // Serializes echoed output of every process of this program.

func (pw *prefixWriter) Write(b []byte) (int, error) {
	pw.buf = append(pw.buf, b...)
	for {
		i := bytes.IndexByte(pw.buf, '\n')
		if i < 0 {
			break
		}
		echoMu.Lock()
		_, _ = io.WriteString(pw.w, pw.prefix+string(pw.buf[:i+1]))
		echoMu.Unlock()
		pw.buf = pw.buf[i+1:]
	}
	return len(b), nil
}
