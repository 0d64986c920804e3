package chaos

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill a worker if this process dies without stopping it (a
// timed-out or interrupted test binary).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
