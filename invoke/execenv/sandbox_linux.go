package execenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Containment: every process an environment starts ends with it, whatever session or process
// group it moved to.
//
//   - With a writable cgroup v2 hierarchy, each environment is a cgroup of its own, a child of
//     esm's cgroup: the process starts in it (clone3's CLONE_INTO_CGROUP, so that not even its
//     first child can escape), and ending the environment kills the cgroup (cgroup.kill) and waits
//     until it is empty. Where the hierarchy has the memory controller, MemorySize is the cgroup's
//     memory.max (no swap), and an exceeded limit is reported as Lambda reports it.
//   - Elsewhere esm makes itself a child subreaper (PR_SET_CHILD_SUBREAPER): a function's process
//     whose parent ends is handed to esm, not to init. Ending the environment kills its process
//     group and sweeps its descendants (by parent, from /proc) and the orphans handed to esm that
//     carry the environment's AWS_LAMBDA_RUNTIME_API, until none is left, and reaps them.
type containMode int

const (
	containCgroup containMode = iota + 1
	containSubreaper
)

// containment is how this process contains its environments, found once.
type containment struct {
	mode containMode
	// base is the cgroup directory the environments' cgroups are made in (containCgroup).
	base string
	// memory: the environments' cgroups get the memory controller (memory.max).
	memory bool
	// notice says what is missing when the environments are not wholly Lambda's (no memory
	// limit, no cgroup); empty when nothing is.
	notice string
}

var detected = sync.OnceValue(detectContainment)

// cgroupSeq numbers the environments' cgroups within this process.
var cgroupSeq atomic.Int64

func detectContainment() *containment {
	base, err := ownCgroupDir()
	if err == nil {
		err = probeCgroup(base)
	}
	if err != nil {
		c := subreaperContainment()
		c.notice = fmt.Sprintf("no writable cgroup v2 (%v): %s", err, c.notice)
		return c
	}
	c := &containment{mode: containCgroup, base: base}
	removeStale(base)
	if merr := enableMemory(base); merr != nil {
		c.notice = fmt.Sprintf("cgroup v2 without the memory controller (%v): memory is not limited (MemorySize is only reported)", merr)
	} else {
		c.memory = true
	}
	return c
}

// subreaperContainment makes esm a child subreaper and contains environments by sweeping.
func subreaperContainment() *containment {
	c := &containment{mode: containSubreaper}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		c.notice = fmt.Sprintf("no child subreaper (%v): a process that leaves its environment's process group and parent may outlive it; memory is not limited (MemorySize is only reported)", err)
	} else {
		c.notice = "the processes of an environment are swept through a child subreaper; memory is not limited (MemorySize is only reported)"
	}
	return c
}

// ownCgroupDir is the directory of this process's cgroup in the cgroup v2 hierarchy.
func ownCgroupDir() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var own string
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own, found = p, true
		}
	}
	if !found {
		return "", errors.New("no cgroup v2 entry in /proc/self/cgroup")
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		rel, err := filepath.Rel(f[3], own)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		return filepath.Join(f[4], rel), nil
	}
	return "", errors.New("no cgroup2 file system mounted")
}

// probeCgroup checks that cgroups can be made under base and that cgroup.kill exists.
func probeCgroup(base string) error {
	dir := filepath.Join(base, fmt.Sprintf("esm-%d-probe", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	defer os.Remove(dir)
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		return fmt.Errorf("no cgroup.kill (Linux 5.14 or later): %w", err)
	}
	return nil
}

// staleCgroup is the name of an environment's cgroup: esm-<esm's PID>-<n>.
var staleCgroup = regexp.MustCompile(`^esm-([0-9]+)-([0-9]+|probe)$`)

// removeStale kills and removes the environments' cgroups left by an esm process that is gone
// (killed before it could end them), so that what they ran does not outlive it for good.
func removeStale(base string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, ent := range ents {
		m := staleCgroup.FindStringSubmatch(ent.Name())
		if m == nil || !ent.IsDir() {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid == os.Getpid() || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue // its esm is alive
		}
		s := &sandbox{mode: containCgroup, dir: filepath.Join(base, ent.Name()), root: -1}
		_ = os.WriteFile(filepath.Join(s.dir, "cgroup.kill"), []byte("1"), 0)
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && s.populated(); {
			time.Sleep(2 * time.Millisecond)
		}
		s.remove()
	}
}

// enableMemory gives base's children the memory controller.
func enableMemory(base string) error {
	ctrl, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		return err
	}
	if !containsWord(ctrl, "memory") {
		return fmt.Errorf("%s lists no memory controller", filepath.Join(base, "cgroup.controllers"))
	}
	sub, err := os.ReadFile(filepath.Join(base, "cgroup.subtree_control"))
	if err == nil && containsWord(sub, "memory") {
		return nil
	}
	return os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte("+memory"), 0)
}

func containsWord(b []byte, w string) bool { return slices.Contains(strings.Fields(string(b)), w) }

// sandbox is one environment's containment.
type sandbox struct {
	c      *containment
	mode   containMode // the containment's, unless this environment could not have a cgroup
	dir    string      // its cgroup (containCgroup)
	fd     *os.File    // the open cgroup directory, until the process started
	memory bool        // memory.max is set
	addr   string      // the environment's Runtime API, which its processes carry (containSubreaper)
	root   int         // the environment's first process
}

// newSandbox prepares the containment of an environment about to start. It always returns a
// sandbox; a non-nil error says what it lacks: an environment whose cgroup cannot be made is
// contained by sweeping, one whose memory limit cannot be set runs without it.
func newSandbox(c *containment, addr string, memoryMB int) (*sandbox, error) {
	s := &sandbox{c: c, mode: c.mode, addr: addr}
	if c.mode != containCgroup {
		return s, nil
	}
	dir := filepath.Join(c.base, fmt.Sprintf("esm-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return s.sweepInstead(fmt.Errorf("cgroup: %w", err))
	}
	fd, err := os.Open(dir)
	if err != nil {
		_ = os.Remove(dir)
		return s.sweepInstead(fmt.Errorf("cgroup: %w", err))
	}
	s.dir, s.fd = dir, fd
	if !c.memory {
		return s, nil
	}
	limit := strconv.FormatInt(int64(memoryMB)<<20, 10)
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(limit), 0); err != nil {
		return s, fmt.Errorf("cgroup memory.max: %w", err)
	}
	// No swap, and an out-of-memory kill ends the whole environment, as on Lambda.
	_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0)
	_ = os.WriteFile(filepath.Join(dir, "memory.oom.group"), []byte("1"), 0)
	s.memory = true
	return s, nil
}

// setProcAttr puts the process in a process group of its own (so that a kill reaches the
// children a runtime starts, such as curl under a shell bootstrap), in the environment's cgroup,
// and has the kernel kill it when esm dies.
func (s *sandbox) setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if s.fd != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(s.fd.Fd())
	}
}

// intoCgroup reports whether the process is to start in its cgroup.
func (s *sandbox) intoCgroup() bool { return s.fd != nil }

// startOutside has the process start outside its cgroup, for adopt to move it in.
func (s *sandbox) startOutside() {
	if s.fd != nil {
		_ = s.fd.Close()
		s.fd = nil
	}
}

// adopt moves a process started outside into the environment's cgroup (what it started in the
// meantime stays out; a process just started has had no time to). When that fails too, the
// environment is contained by sweeping its process tree instead.
func (s *sandbox) adopt(pid int) error {
	f, err := os.OpenFile(filepath.Join(s.dir, "cgroup.procs"), os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(strconv.Itoa(pid))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		_ = os.Remove(s.dir)
		s.dir, s.memory = "", false
		_, err = s.sweepInstead(fmt.Errorf("cgroup: %w", err))
		return err
	}
	return nil
}

// sweepInstead contains an environment that has no cgroup by sweeping, with esm as the child
// subreaper that the orphans of its processes are handed to; it returns s and why.
func (s *sandbox) sweepInstead(why error) (*sandbox, error) {
	s.mode = containSubreaper
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return s, fmt.Errorf("%w; no child subreaper either: %w", why, err)
	}
	return s, why
}

// started records the environment's first process.
func (s *sandbox) started(pid int) {
	s.root = pid
	if s.fd != nil {
		_ = s.fd.Close()
		s.fd = nil
	}
}

// abandon undoes newSandbox for a process that did not start.
func (s *sandbox) abandon() {
	if s.fd != nil {
		_ = s.fd.Close()
		s.fd = nil
	}
	if s.dir != "" {
		_ = os.Remove(s.dir)
	}
}

// killAll kills every process of the environment and returns once none is left running (or
// after 5 s, when the kernel has not emptied the cgroup). rootReaped: the first process has ended
// and been reaped, so its PID may belong to another process by now.
func (s *sandbox) killAll(rootReaped bool) {
	if s.root == 0 {
		return
	}
	// The process group outlives its leader while a member is left, and its ID is not reused
	// meanwhile.
	_ = syscall.Kill(-s.root, syscall.SIGKILL)
	if s.mode == containCgroup {
		_ = os.WriteFile(filepath.Join(s.dir, "cgroup.kill"), []byte("1"), 0)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && s.populated(); {
			time.Sleep(2 * time.Millisecond)
		}
		return
	}
	s.sweep(rootReaped)
}

// populated reports whether a process is left in the environment's cgroup.
func (s *sandbox) populated() bool {
	b, err := os.ReadFile(filepath.Join(s.dir, "cgroup.events"))
	if err != nil {
		return false
	}
	return bytes.Contains(b, []byte("populated 1"))
}

// remove deletes the environment's cgroup once its processes are gone.
func (s *sandbox) remove() {
	if s.dir != "" {
		_ = os.Remove(s.dir)
	}
}

// outOfMemory reports whether the kernel killed a process of the environment for passing its
// memory limit.
func (s *sandbox) outOfMemory() bool {
	if !s.memory {
		return false
	}
	return eventCount(filepath.Join(s.dir, "memory.events"), "oom_kill") > 0
}

// peakMemoryMB is the environment's peak memory (memory.peak, Linux 5.19 or later), in MB
// rounded up; 0 when unknown.
func (s *sandbox) peakMemoryMB() int {
	if !s.memory {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "memory.peak"))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return int((n + 1<<20 - 1) >> 20)
}

// eventCount reads one counter of a cgroup's flat keyed file (memory.events).
func eventCount(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// proc is what the sweep needs of a process.
type proc struct {
	ppid   int
	zombie bool
}

// processes reads every process's parent and state from /proc.
func processes() map[int]proc {
	out := map[int]proc{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue
		}
		// PID (COMM) STATE PPID ...; COMM may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out[pid] = proc{ppid: ppid, zombie: f[0] == "Z" || f[0] == "X"}
	}
	return out
}

// carries reports whether pid's environment names the Runtime API addr.
func carries(pid int, addr string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	return bytes.Contains(append([]byte{0}, b...), []byte("\x00AWS_LAMBDA_RUNTIME_API="+addr+"\x00"))
}

// sweep kills the environment's processes found from /proc until none is left running: the
// descendants of its first process, and the orphans handed to esm (the subreaper) that carry its
// Runtime API, with their descendants. Killed orphans are reaped; the first process is reaped by
// its exec.Cmd.
func (s *sandbox) sweep(rootReaped bool) {
	self := os.Getpid()
	known := map[int]bool{}
	if !rootReaped {
		known[s.root] = true
	}
	for round := 0; round < 1000; round++ {
		ps := processes()
		for pid, p := range ps {
			if p.ppid == self && !known[pid] && carries(pid, s.addr) {
				known[pid] = true
			}
		}
		for grew := true; grew; { // descendants of everything known, to a fixed point
			grew = false
			for pid, p := range ps {
				if !known[pid] && known[p.ppid] {
					known[pid], grew = true, true
				}
			}
		}
		running := 0
		for pid := range known {
			p, ok := ps[pid]
			if !ok {
				continue
			}
			if p.zombie {
				if p.ppid == self && pid != s.root {
					var ws unix.WaitStatus
					if n, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); n == pid {
						delete(known, pid) // reaped: its PID may be reused
					}
				}
				continue
			}
			running++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if running == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// ProtectHost makes this process non-dumpable (PR_SET_DUMPABLE 0): a process of the same user,
// such as a function esm runs, can then neither read its environment (/proc/<pid>/environ) nor
// its memory (ptrace), nor get a core dump of it. Root is not held back by it. The function's
// own processes are not affected: exec makes a process dumpable again.
func ProtectHost() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", err)
	}
	return nil
}
