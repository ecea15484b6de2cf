/*
Copyright The book-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package localcluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// procID names one process instance. The start time is kept next to the pid
// because a pid file outlives its process and the kernel reuses pids: Stop
// must never signal an unrelated process that happens to have the same pid.
type procID struct {
	Pid       int    `json:"pid"`
	StartTime uint64 `json:"startTime,omitempty"`
}

// process is one control plane process, either started by this Go process
// (cmd is set) or found again from a pid file by Attach (cmd is nil).
type process struct {
	name    string
	logPath string
	id      procID
	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd.Wait returned
	waitErr error         // cmd.Wait's result, valid after done is closed
}

// namespace is a network namespace other than the host's that a process
// can be born in; nil is the host's.
// The node's is one (node_netns.go). // fork:line node
type namespace interface {
	// enter runs start on a thread inside the namespace; threadLocked says
	// the calling goroutine holds its thread for good (the forker's).
	enter(start func() error, threadLocked bool) error
}

// startProcess starts bin with args. Output is appended to logPath (kept
// across restarts, so a fault test can see both runs) and, unless detached,
// also copied to extra.
//
// A detached process gets its own session and no parent-death signal, so it
// survives this Go process; otherwise it is killed when this process dies,
// which keeps a crashed or interrupted test from leaking a control plane.
// With a namespace it is born in that network namespace.
func startProcess(name, bin string, args []string, logPath string, detached bool, ns namespace, extra io.Writer) (*process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localcluster: opening %s log: %w", name, err)
	}

	cmd := exec.Command(bin, args...)
	cmd.Stdin = nil
	// Given the file itself, the child writes to its own copy of the
	// descriptor and ours can be closed at once. Given extra too, exec
	// copies through a pipe until cmd.Wait, and the file must stay open
	// until then: a write error would end the copy, and the child would
	// die of SIGPIPE at its next line.
	piped := !detached && extra != nil
	if piped {
		w := io.MultiWriter(logFile, extra)
		cmd.Stdout, cmd.Stderr = w, w
	} else {
		cmd.Stdout, cmd.Stderr = logFile, logFile
	}
	cmd.SysProcAttr = sysProcAttr(detached)
	err = startCmd(cmd, detached, ns)
	if err != nil || !piped {
		logFile.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("localcluster: starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	p.id = procID{Pid: cmd.Process.Pid}
	if st, _, err := procStat(p.id.Pid); err == nil {
		p.id.StartTime = st
	}
	go func() {
		p.waitErr = cmd.Wait()
		if piped {
			logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// attachProcess takes over a process from a pid file.
func attachProcess(name, logPath string, id procID) *process {
	return &process{name: name, logPath: logPath, id: id}
}

// alive reports whether this very process still runs.
func (p *process) alive() bool {
	if p == nil || p.id.Pid <= 0 {
		return false
	}
	if p.done != nil {
		select {
		case <-p.done:
			return false
		default:
			return true
		}
	}
	start, zombie, err := procStat(p.id.Pid)
	if err != nil || zombie {
		return false
	}
	return p.id.StartTime == 0 || start == p.id.StartTime
}

// signal sends sig only if the process is still the one we started.
func (p *process) signal(sig syscall.Signal) error {
	if !p.alive() {
		return nil
	}
	err := syscall.Kill(p.id.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// wait waits up to timeout for the process to exit and reports whether it did.
func (p *process) wait(timeout time.Duration) bool {
	if p.done != nil {
		select {
		case <-p.done:
			return true
		case <-time.After(timeout):
			return false
		}
	}
	deadline := time.Now().Add(timeout)
	for p.alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// stop asks the process to exit and kills it if it does not within grace, so
// that Stop always returns with the process gone.
func (p *process) stop(grace time.Duration) error {
	if !p.alive() {
		return nil
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("localcluster: stopping %s (pid %d): %w", p.name, p.id.Pid, err)
	}
	if p.wait(grace) {
		return nil
	}
	return p.kill()
}

// kill ends the process at once, as a crash would.
func (p *process) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("localcluster: killing %s (pid %d): %w", p.name, p.id.Pid, err)
	}
	if !p.wait(10 * time.Second) {
		return fmt.Errorf("localcluster: %s (pid %d) still runs 10s after SIGKILL: check it with ps", p.name, p.id.Pid)
	}
	return nil
}

// exitError describes why a process ended during start, with the end of its
// log, which usually names the bad flag or the port in use.
func (p *process) exitError() error {
	why := "exited"
	if p.waitErr != nil {
		why = "exited: " + p.waitErr.Error()
	}
	return fmt.Errorf("localcluster: %s %s during start: %s (full log: %s)", p.name, why, logTail(p.logPath), p.logPath)
}

// logTail returns the last non-empty line of a log for one-line errors.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "no log"
	}
	defer f.Close()
	const max = 8192
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(-max, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	if l := lastLine(string(b)); l != "" {
		return strings.TrimSpace(l)
	}
	return "empty log"
}
