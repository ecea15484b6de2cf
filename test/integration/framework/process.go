//go:build linux

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

package framework

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// LogLine is one line a Process wrote (stdout and stderr together), with the
// time this test process read it.
type LogLine struct {
	At   time.Time
	Text string
}

// Process is a program started by StartProcess: typically the controller
// binary, which a test may kill at any moment. Its output is kept line by
// line. It is killed at the end of the test, and dies with the test binary
// even if that is killed itself (Linux parent-death signal).
type Process struct {
	Name string

	cmd    *exec.Cmd
	output io.Writer     // where the output goes instead of lines, if set
	exited chan struct{} // closed once the process is reaped and its output read

	mu       sync.Mutex
	lines    []LogLine
	killedAt time.Time
	exitedAt time.Time
	waitErr  error
}

// StartProcess starts bin with args and registers a cleanup that SIGKILLs it
// (if still running) and, if the test failed, logs the end of its output.
func StartProcess(t testing.TB, name, bin string, args ...string) *Process {
	t.Helper()
	p, err := Start(name, bin, args, ProcessOptions{})
	if err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		if t.Failed() {
			t.Logf("last lines of %s (pid %d):\n%s", p.Name, p.Pid(), p.Tail(60))
		}
	})
	return p
}

// RunToExit runs bin with args that make it stop by itself (bad input,
// --help) and returns its output and exit code. It fails the test if bin
// still runs after timeout.
func RunToExit(t testing.TB, timeout time.Duration, name, bin string, args ...string) (output string, code int) {
	t.Helper()
	p := StartProcess(t, name, bin, args...)
	code, err := p.Wait(timeout)
	if err != nil {
		t.Fatalf("%v; output:\n%s", err, p.Tail(20))
	}
	return p.Output(), code
}

// ProcessOptions are what Start may change about a process.
type ProcessOptions struct {
	// Env, if not nil, is the environment instead of this process's.
	Env []string
	// Output, if set, receives the process's output, which the Process
	// then does not keep (Lines and Tail are empty): for long runs, such as
	// the benchmark's, whose logs go to files.
	Output io.Writer
}

// Start starts bin with args, for programs that are not tests (the
// benchmark): nothing kills it but the caller, or the death of this
// process. KUBECONFIG is emptied: the flags say which cluster.
func Start(name, bin string, args []string, o ProcessOptions) (*Process, error) {
	cmd := exec.Command(bin, args...)
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env[:len(env):len(env)], "KUBECONFIG=")
	// Without Setpgid a SIGINT from the terminal reaches the child too,
	// which is what we want; Pdeathsig kills it if this process dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := startLocked(cmd); err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	pw.Close() // the child holds its own copy
	p := &Process{Name: name, cmd: cmd, output: o.Output, exited: make(chan struct{})}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		p.readLines(pr)
	}()
	go func() {
		err := cmd.Wait()
		exitedAt := time.Now()
		<-readDone // EOF: every line the process wrote is recorded
		pr.Close()
		p.mu.Lock()
		p.waitErr, p.exitedAt = err, exitedAt
		p.mu.Unlock()
		close(p.exited)
	}()
	return p, nil
}

func (p *Process) readLines(r io.Reader) {
	if p.output != nil {
		_, _ = io.Copy(p.output, r)
		return
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := LogLine{At: time.Now(), Text: sc.Text()}
		p.mu.Lock()
		p.lines = append(p.lines, line)
		p.mu.Unlock()
	}
	// Drain whatever is left (a line longer than the buffer), so the child
	// never blocks on a full pipe.
	_, _ = io.Copy(io.Discard, r)
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited and all its output is read.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL, as a crash or an OOM kill would, and waits until the
// process is gone. It records the moment of the kill (KilledAt). Killing a
// process that has exited does nothing.
func (p *Process) Kill() error {
	if !p.Running() {
		return nil
	}
	p.mu.Lock()
	if p.killedAt.IsZero() {
		p.killedAt = time.Now()
	}
	p.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !strings.Contains(err.Error(), "process already finished") {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) still runs 30s after SIGKILL", p.Name, p.Pid())
	}
}

// KilledAt is when Kill sent SIGKILL; zero if it never did.
func (p *Process) KilledAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killedAt
}

// ExitedAt is when the process was seen to exit; zero while it runs.
func (p *Process) ExitedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitedAt
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits up to timeout for the process to exit and returns its exit
// code, or an error if it is still running.
func (p *Process) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.exited:
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s (pid %d) still runs after %v", p.Name, p.Pid(), timeout)
	}
	return p.cmd.ProcessState.ExitCode(), nil
}

// ExitCode is the process's exit code once it has exited; ok is false
// while it runs.
func (p *Process) ExitCode() (code int, ok bool) {
	if p.Running() {
		return 0, false
	}
	return p.cmd.ProcessState.ExitCode(), true
}

// Lines returns a copy of the output lines read so far.
func (p *Process) Lines() []LogLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]LogLine(nil), p.lines...)
}

// CountLines counts the output lines so far that contain substr.
func (p *Process) CountLines(substr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if strings.Contains(l.Text, substr) {
			n++
		}
	}
	return n
}

// Output is everything the process wrote so far.
func (p *Process) Output() string { return p.Tail(0) }

// Tail returns the last n lines of output (all of it for n <= 0).
func (p *Process) Tail(n int) string {
	lines := p.Lines()
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// Pdeathsig fires when the parent *thread* exits, not the parent process
// (golang/go#27505), and the Go runtime ends threads whose locked goroutine
// returns. Children are therefore forked from one goroutine locked to its
// thread for the life of the test binary, as pkg/localcluster does.
var forker struct {
	once sync.Once
	reqs chan forkReq
}

type forkReq struct {
	cmd  *exec.Cmd
	done chan error
}

func startLocked(cmd *exec.Cmd) error {
	forker.once.Do(func() {
		forker.reqs = make(chan forkReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread outlives every child
			for r := range forker.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	forker.reqs <- forkReq{cmd: cmd, done: done}
	return <-done
}
