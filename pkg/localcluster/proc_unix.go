//go:build unix && !linux

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
	"os/exec"
	"syscall"
)

// Without Pdeathsig, children of a test that dies are left running; Stop
// still ends them on every normal path.
func sysProcAttr(detached bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: detached}
}

func startCmd(cmd *exec.Cmd, _ bool, ns namespace) error {
	if ns != nil {
		return errors.New("localcluster: starting a process in a network namespace needs Linux")
	}
	return cmd.Start()
}

// procStat cannot tell a reused pid apart here; it only says whether the pid
// exists.
func procStat(pid int) (startTime uint64, zombie bool, err error) {
	return 0, false, syscall.Kill(pid, 0)
}
