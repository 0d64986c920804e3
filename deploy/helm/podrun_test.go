package helm

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kinesis-esm/esm/deploy/image"
	"github.com/kinesis-esm/esm/internal/testbed/local"
)

// podSpec is what the test takes from the rendered pod: esm's container as a process in the
// image's root file system, and the sidecar's port and environment.
type podSpec struct {
	podName  string
	rootfs   string
	argv     []string
	env      []string
	dir      string
	uid, gid uint32
	grace    time.Duration
	ready    string // the readiness probe's URL
	live     string // the liveness probe's URL

	sidecar     bool
	sidecarEnv  []string
	sidecarPort int
}

// podFrom renders vals, decodes the Deployment strictly and prepares its pod: the esm image
// (img, this machine's platform) unpacked under dir/rootfs with the pod's volumes.
func podFrom(t *testing.T, vals map[string]any, img v1.ImageIndex, dir string) *podSpec {
	t.Helper()
	objs := decodeStrict(t, vals)
	d := deployment(t, vals)
	pod := d.Spec.Template.Spec
	c := container(t, &pod, "esm")
	p := &podSpec{podName: "esm-7c9d-x2x4q", rootfs: filepath.Join(dir, "rootfs"),
		grace: time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second}

	platform, err := image.Platform(img, goruntime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	if err := image.Unpack(platform, p.rootfs); err != nil {
		t.Fatal(err)
	}
	cf, err := platform.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	p.uid, p.gid = user(t, &pod, c, cf.Config.User)
	p.dir = cf.Config.WorkingDir
	p.env = append(append([]string(nil), cf.Config.Env...), containerEnv(t, c, p.podName)...)
	p.argv = command(t, c, cf.Config, p.env)
	if sc := c.SecurityContext; sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		readOnly(t, p.rootfs)
	}
	volumes(t, p.rootfs, c, pod.Volumes, objs)
	devices(t, p.rootfs)
	p.ready, p.live = probeURL(t, c, c.ReadinessProbe), probeURL(t, c, c.LivenessProbe)

	for i := range pod.Containers {
		if s := &pod.Containers[i]; s.Name != "esm" {
			if len(s.Ports) != 1 {
				t.Fatalf("sidecar %s: ports %v, want the function's one", s.Name, s.Ports)
			}
			p.sidecar, p.sidecarPort = true, int(s.Ports[0].ContainerPort)
			p.sidecarEnv = containerEnv(t, s, p.podName)
		}
	}
	return p
}

// user is the container's numeric user and group (its security context's, else the pod's, as
// the kubelet resolves them), which must be the image's, and must be non-root.
func user(t *testing.T, pod *corev1.PodSpec, c *corev1.Container, imageUser string) (uint32, uint32) {
	t.Helper()
	var uid, gid *int64
	var nonRoot *bool
	if ps := pod.SecurityContext; ps != nil {
		uid, gid, nonRoot = ps.RunAsUser, ps.RunAsGroup, ps.RunAsNonRoot
	}
	if sc := c.SecurityContext; sc != nil {
		uid, gid, nonRoot = cmp.Or(sc.RunAsUser, uid), cmp.Or(sc.RunAsGroup, gid), cmp.Or(sc.RunAsNonRoot, nonRoot)
	}
	if uid == nil || gid == nil || nonRoot == nil || !*nonRoot || *uid == 0 {
		t.Fatalf("esm's container names no non-root user: pod %+v, container %+v", pod.SecurityContext, c.SecurityContext)
	}
	if want := fmt.Sprintf("%d:%d", *uid, *gid); want != imageUser {
		t.Fatalf("the container runs as %s, the image as %s", want, imageUser)
	}
	return uint32(*uid), uint32(*gid)
}

// containerEnv resolves the container's env as the kubelet does, the downward API's pod name
// included; envFrom and other sources are refused (the examples use none).
func containerEnv(t *testing.T, c *corev1.Container, podName string) []string {
	t.Helper()
	if len(c.EnvFrom) > 0 {
		t.Fatalf("%s: envFrom is not supported by this test", c.Name)
	}
	var env []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				t.Fatalf("%s: env %s from %+v is not supported by this test", c.Name, e.Name, e.ValueFrom)
			}
			v = podName
		}
		env = append(env, e.Name+"="+v)
	}
	return env
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// command is the container's command line: its command (else the image's entrypoint) and its
// arguments (else the image's), $(VAR) expanded from env as Kubernetes does. A metrics address
// on every interface is narrowed to 127.0.0.1, the only address this test may bind; the port
// stays the rendered one.
func command(t *testing.T, c *corev1.Container, cfg v1.Config, env []string) []string {
	t.Helper()
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	argv := append([]string(nil), cfg.Entrypoint...)
	if len(c.Command) > 0 {
		argv = append([]string(nil), c.Command...)
	}
	if len(c.Args) > 0 {
		argv = append(argv, c.Args...)
	} else {
		argv = append(argv, cfg.Cmd...)
	}
	for i, a := range argv {
		a = varRef.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := vars[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
		argv[i] = strings.Replace(a, "0.0.0.0:", "127.0.0.1:", 1)
	}
	if len(argv) == 0 {
		t.Fatal("esm's container has no command")
	}
	return argv
}

// volumes gives the container its mounts inside the root file system: a ConfigMap's keys as
// files, an emptyDir as an empty directory anyone may write to.
func volumes(t *testing.T, rootfs string, c *corev1.Container, vols []corev1.Volume, objs map[string]any) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		var vol *corev1.Volume
		for i := range vols {
			if vols[i].Name == m.Name {
				vol = &vols[i]
			}
		}
		if vol == nil {
			t.Fatalf("mount %s names no volume", m.Name)
		}
		target := filepath.Join(rootfs, m.MountPath)
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case vol.ConfigMap != nil:
			cm, ok := objs["ConfigMap/"+vol.ConfigMap.Name].(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("volume %s: the chart renders no ConfigMap %s", m.Name, vol.ConfigMap.Name)
			}
			for k, v := range cm.Data {
				if err := os.WriteFile(filepath.Join(target, k), []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		case vol.EmptyDir != nil:
			if err := os.Chmod(target, 0o777|os.ModeSticky); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("volume %s: not a ConfigMap or an emptyDir", m.Name)
		}
	}
}

// readOnly makes the root file system one the container's user cannot write to (a stand-in for
// a read-only mount): no write permission for anyone, the owners kept (the user's home stays
// its to read). The volumes mounted afterwards are writable as they are in a pod.
func readOnly(t *testing.T, rootfs string) {
	t.Helper()
	err := filepath.Walk(rootfs, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.Mode()&os.ModeSymlink != 0 {
			return err
		}
		return os.Chmod(path, fi.Mode()&^0o222&(os.ModePerm|os.ModeSticky))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// devices makes the character devices every container runtime gives a container.
func devices(t *testing.T, rootfs string) {
	t.Helper()
	dev := filepath.Join(rootfs, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, minor := range map[string]int{"null": 3, "zero": 5, "random": 8, "urandom": 9} {
		if err := syscall.Mknod(filepath.Join(dev, name), syscall.S_IFCHR|0o666, 1<<8|minor); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dev, name), 0o666); err != nil {
			t.Fatal(err)
		}
	}
}

// probeURL is the URL of an HTTP probe, its port resolved by name among the container's ports.
func probeURL(t *testing.T, c *corev1.Container, p *corev1.Probe) string {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Fatalf("esm's container has no HTTP probe: %+v", p)
	}
	// A port by name or number, but one the container declares: only those are the ports this
	// test chose (another process of the machine may listen on any other).
	port := 0
	for _, cp := range c.Ports {
		if cp.Name == p.HTTPGet.Port.StrVal || int(cp.ContainerPort) == p.HTTPGet.Port.IntValue() {
			port = int(cp.ContainerPort)
		}
	}
	if port == 0 {
		t.Fatalf("the probe's port %s is none of the container's %v", p.HTTPGet.Port.String(), c.Ports)
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s", port, p.HTTPGet.Path)
}

// readyWithin bounds the wait for readiness: a worker on the emulators is ready in seconds.
const readyWithin = time.Minute

// pod is a running pod: esm's process and the sidecar.
type pod struct {
	spec   *podSpec
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // esm's exit, once exited is closed
	mu     sync.Mutex
	out    strings.Builder
	rie    *local.RIE
}

func (p *pod) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// startPod starts the sidecar, then esm chrooted into its root file system in new mount and PID
// namespaces (esm is PID 1 there, as in a container) as the container's user.
func startPod(ctx context.Context, t *testing.T, w *podWorld, s *podSpec) *pod {
	t.Helper()
	p := &pod{spec: s, exited: make(chan struct{})}
	if s.sidecar {
		var err error
		p.rie, err = local.StartRIE(ctx, local.RIEOptions{Binary: w.rie, Handler: []string{w.bootstrap}, Env: s.sidecarEnv,
			Port: s.sidecarPort, LogWriter: p})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.rie.Stop() })
	}
	p.cmd = exec.Command(s.argv[0], s.argv[1:]...)
	p.cmd.Env, p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = s.env, s.dir, p, p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     s.rootfs,
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID,
		Credential: &syscall.Credential{Uid: s.uid, Gid: s.gid, Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %q in %s: %v", s.argv, s.rootfs, err)
	}
	t.Logf("pod: %q as %d:%d in %s", s.argv, s.uid, s.gid, s.rootfs)
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// fail ends the test with esm's and the sidecar's output.
func (p *pod) fail(t *testing.T, format string, args ...any) {
	t.Helper()
	p.mu.Lock()
	out := p.out.String()
	p.mu.Unlock()
	t.Fatalf("%s\noutput of the pod:\n%s", fmt.Sprintf(format, args...), out)
}

// waitReady waits for the readiness probe to answer 200, and checks the liveness probe.
func (p *pod) waitReady(ctx context.Context, t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, readyWithin)
	defer cancel()
	for {
		if code, _ := get(ctx, p.spec.ready); code == 200 {
			break
		}
		select {
		case <-ctx.Done():
			p.fail(t, "never ready on %s", p.spec.ready)
		case <-p.exited:
			p.fail(t, "esm exited before it was ready: %v", p.err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if code, err := get(ctx, p.spec.live); code != 200 {
		p.fail(t, "liveness %s: %d %v", p.spec.live, code, err)
	}
}

// stop sends SIGTERM, as the kubelet does, and wants exit 0 within the grace period.
func (p *pod) stop(t *testing.T) {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			p.fail(t, "esm exited with %v on SIGTERM", p.err)
		}
		t.Logf("esm exited 0 %v after SIGTERM (grace %v)", time.Since(start).Round(time.Millisecond), p.spec.grace)
	case <-time.After(p.spec.grace):
		p.fail(t, "esm still runs %v after SIGTERM", p.spec.grace)
	}
}
