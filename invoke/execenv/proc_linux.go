package execenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxMemoryMB is the environment's peak memory: its cgroup's when memory is limited, else the
// process's peak resident memory (VmHWM); in MB rounded up, 0 when unknown.
func (e *environment) maxMemoryMB() int {
	if mb := e.sandbox.peakMemoryMB(); mb > 0 {
		return mb
	}
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
