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
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

func sysProcAttr(detached bool) *syscall.SysProcAttr {
	if detached {
		// A session of its own: Ctrl-C in the terminal that ran
		// hack/local-up.sh must not reach the cluster.
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// Pdeathsig fires when the parent *thread* exits, not the parent process
// (golang/go#27505). The Go runtime ends a thread when a goroutine locked to
// it returns, so a child forked from an arbitrary thread could be killed at
// a random moment. Forking from one thread that stays locked for the life of
// the process avoids that.
var forker struct {
	once sync.Once
	reqs chan forkReq
}

type forkReq struct {
	start func() error
	done  chan error
}

// startCmd starts cmd; with a namespace, inside it: a child is born in
// the namespace of the thread that forks it, so that thread enters the
// namespace for the fork and leaves it again.
func startCmd(cmd *exec.Cmd, detached bool, ns namespace) error {
	start := cmd.Start
	if ns != nil {
		start = func() error { return ns.enter(cmd.Start, true) }
	}
	if detached {
		if ns != nil {
			return ns.enter(cmd.Start, false)
		}
		return cmd.Start()
	}
	forker.once.Do(func() {
		forker.reqs = make(chan forkReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread must outlive every child
			for r := range forker.reqs {
				r.done <- r.start()
			}
		}()
	})
	done := make(chan error, 1)
	forker.reqs <- forkReq{start: start, done: done}
	return <-done
}

// procStat reads the start time (in clock ticks since boot) and the state of
// pid from /proc. A zombie counts as gone: a detached process whose parent
// exited may wait a while to be reaped.
func procStat(pid int) (startTime uint64, zombie bool, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, err
	}
	// The command name (field 2) may contain spaces and parentheses; the
	// fields after its closing parenthesis are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, false, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	startTime, err = strconv.ParseUint(f[19], 10, 64) // field 22
	return startTime, f[0] == "Z", err
}
