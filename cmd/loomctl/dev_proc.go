package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// stackProgramNames are the programs a stack runs; only processes of these
// programs are ever killed by `dev down`, never a shell that happens to
// mention the state folder.
var stackProgramNames = map[string]bool{ //nolint:gochecknoglobals // Treated as a constant.
	"etcd": true, "kube-apiserver": true, "kube-controller-manager": true,
	"watcher": true, "renderer": true, "binder": true, "secrets": true, "rbac-manager": true,
	"provider-nop": true, "loomctl": true,
}

// stackProcesses returns the live processes of a stack program whose
// command line refers to stateDir (every process the stack starts gets a
// path inside it as a flag).
func stackProcesses(stateDir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		args := cmdline(pid)
		if len(args) == 0 || !stackProgramNames[filepath.Base(args[0])] {
			continue
		}
		if mentions(args, stateDir) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cmdline returns the arguments of pid, or nil if it is gone (or a zombie).
func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
}

// mentions reports whether an argument is dir, a path inside dir, or a
// flag whose value is one of those.
func mentions(args []string, dir string) bool {
	dir = filepath.Clean(dir)
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = v
		}
		if a == dir || strings.HasPrefix(a, dir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func containsArg(args []string, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself
	// contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z'
}

// waitGone waits until none of pids is alive, or timeout passes; it
// reports whether they are all gone.
func waitGone(pids []int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		any := false
		for _, p := range pids {
			any = any || alive(p)
		}
		if !any {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond) //nolint:forbidigo // Polls another process's liveness; there is nothing to wait on.
	}
}
