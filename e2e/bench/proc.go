//go:build e2e

package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HarnessProcess names the benchmark's own process in memory and CPU
// figures: the load generator, the observing watches and the embedded NATS
// server all run in it.
const HarnessProcess = "harness"

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procMonitor samples the stack's processes (the children of this process,
// named by their --replica-id or program name) and this process itself:
// peak resident memory (VmHWM) per process name across restarts, and CPU
// time per process name.
type procMonitor struct {
	mu   sync.Mutex
	peak map[string]int64 // name -> max VmHWM in KiB
	cpu  map[int]pidCPU   // pid -> latest CPU reading
}

type pidCPU struct {
	name  string
	ticks uint64
}

func newProcMonitor() *procMonitor {
	return &procMonitor{peak: map[string]int64{}, cpu: map[int]pidCPU{}}
}

// run samples every interval until ctx ends.
func (m *procMonitor) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		m.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample reads every process once.
func (m *procMonitor) sample() {
	self := os.Getpid()
	pids := map[int]string{self: HarnessProcess}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.ppid != self {
			continue
		}
		pids[pid] = processName(pid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for pid, name := range pids {
		st, err := readStat(pid)
		if err != nil {
			continue
		}
		m.cpu[pid] = pidCPU{name: name, ticks: st.ticks}
		if hwm, err := readHWM(pid); err == nil && hwm > m.peak[name] {
			m.peak[name] = hwm
		}
	}
}

// cpuSeconds returns the CPU time used so far by each process name, summed
// over every process of that name seen (restarted ones included).
func (m *procMonitor) cpuSeconds() map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]float64{}
	for _, c := range m.cpu {
		out[c.name] += float64(c.ticks) / clockTicks
	}
	return out
}

// peakMiB returns the peak resident memory of each process name in MiB.
func (m *procMonitor) peakMiB() map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]float64{}
	for n, kib := range m.peak {
		out[n] = round(float64(kib)/1024, 1)
	}
	return out
}

type procStat struct {
	ppid  int
	ticks uint64 // utime + stime
}

// readStat reads the parent and CPU time of pid from /proc/<pid>/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name, in parentheses, may hold spaces: fields start after
	// the last ')'. Field 3 (state) is f[0]; ppid f[1]; utime f[11]; stime f[12].
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("cannot parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("cannot parse /proc/%d/stat", pid)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("cannot parse ppid of %d: %w", pid, err)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, fmt.Errorf("cannot parse CPU time of %d", pid)
	}
	return procStat{ppid: ppid, ticks: ut + stime}, nil
}

// readHWM reads VmHWM (peak resident set size, KiB) of pid.
func readHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// processName names a child of the stack: its --replica-id (services, for
// example "renderer-1") or its program's name ("kube-apiserver").
func processName(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return fmt.Sprintf("pid-%d", pid)
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	for _, a := range args[1:] {
		if v, ok := strings.CutPrefix(a, "--replica-id="); ok {
			return v
		}
	}
	return filepath.Base(args[0])
}

// serviceOf returns the service a process name belongs to: "renderer" for
// "renderer-1", the name itself otherwise.
func serviceOf(process string) string {
	i := strings.LastIndexByte(process, '-')
	if i < 0 {
		return process
	}
	if _, err := strconv.Atoi(process[i+1:]); err != nil {
		return process
	}
	return process[:i]
}
