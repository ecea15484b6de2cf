//go:build unix && !linux

package localcluster

import (
	"os/exec"
	"syscall"
)

// Without Pdeathsig, children of a test that dies are left running; Stop
// still ends them on every normal path.
func sysProcAttr(detached bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: detached}
}

func startCmd(cmd *exec.Cmd, _, netns bool) error {
	if netns {
		return errNodeNeedsLinux
	}
	return cmd.Start()
}

// procStat cannot tell a reused pid apart here; it only says whether the pid
// exists.
func procStat(pid int) (startTime uint64, zombie bool, err error) {
	return 0, false, syscall.Kill(pid, 0)
}
