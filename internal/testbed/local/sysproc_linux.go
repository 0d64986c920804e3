package local

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the emulator in a process group of its own, so that
// killGroup reaches anything it spawns, and has the kernel kill it if the
// process that started it dies without calling Stop (a crashed or timed-out
// test binary, for example).
func setProcAttr(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return nil
}
