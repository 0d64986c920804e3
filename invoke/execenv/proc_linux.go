package execenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// setProcAttr puts the process in a process group of its own (so that a kill reaches the
// children a runtime starts, such as curl under a shell bootstrap) and has the kernel kill it
// when esm dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends SIGKILL to the process's group.
func killGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}

// maxMemoryMB is the process's peak resident memory (VmHWM), in MB rounded up; 0 when unknown.
func (e *environment) maxMemoryMB() int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", e.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:")); ok {
			kb, err := strconv.Atoi(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))))
			if err != nil {
				return 0
			}
			return (kb + 1023) / 1024
		}
	}
	return 0
}

// unread is how many bytes wait in the pipe f reads (FIONREAD, TIOCINQ on Linux); 0 when unknown.
func unread(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ)
		if err == nil {
			n = v
		}
	})
	return n
}
