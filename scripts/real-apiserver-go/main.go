// Command real-apiserver runs a real Kubernetes API server for tests, in one process tree:
//
//   - etcd, embedded in this process, on 127.0.0.1, with a fresh data dir;
//   - kube-apiserver, in this process, on https://127.0.0.1:PORT;
//   - kube-controller-manager (garbage collector, namespace deletion, service accounts, ...)
//     as a child process of this same binary, so that the two components keep their own
//     global state (flags, feature gates, metrics registries, signal handling).
//
// It writes a kubeconfig with an admin credential (group system:masters), prints one line
// "listening on https://127.0.0.1:PORT" to stdout when the server is ready, and stops
// everything on SIGTERM or SIGINT, removing all its temporary files. With --no-controllers
// the controller manager is not started: the server then sees only its clients' requests
// (benchmarks count them), but owner references and namespace deletion have no effect.
//
// Usage: real-apiserver --kubeconfig PATH [--port N] [--log-file PATH] [--no-controllers]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/grpclog"
)

// The hidden first argument with which this binary re-executes itself as the controller manager.
const controllerManagerMode = "__controller-manager"

// The sharded list and watch of Kubernetes 1.36 (KEP-5866), alpha, off by default.
const featureGates = "ShardedListAndWatch=true"

// The controllers that make the server behave like a cluster for operators: owner-reference
// garbage collection, namespace finalization, the "default" ServiceAccount and the root CA
// ConfigMap in every namespace, aggregated ClusterRoles, and the workload controllers
// (their pods stay Pending: there is no scheduler and no kubelet).
var controllers = []string{
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller",
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"job-controller",
	"cronjob-controller",
	"ttl-after-finished-controller",
}

func init() {
	// gRPC (etcd's server, and the API server's etcd clients) warns of every connection
	// closed while still dialing, which the API server does dozens of times as it starts.
	// Keep its errors only. (This runs after the inits of the packages that set it to klog.)
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == controllerManagerMode {
		os.Exit(runControllerManager(os.Args[2:]))
	}
	// The API server names its own clients' user agent, and so the manager of the fields
	// it writes (managedFields), after its binary: as in a cluster, "kube-apiserver".
	os.Args[0] = "kube-apiserver"
	os.Exit(run())
}

func run() int {
	kubeconfig := flag.String("kubeconfig", "", "where to write the admin kubeconfig (required)")
	port := flag.Int("port", 0, "the API server's port on 127.0.0.1 (default: a free one)")
	logFile := flag.String("log-file", "", "write all logs there instead of stderr")
	noControllers := flag.Bool("no-controllers", false,
		"run no kube-controller-manager: only the clients' requests reach the server")
	flag.Parse()
	if *kubeconfig == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: real-apiserver --kubeconfig PATH [--port N] [--log-file PATH] [--no-controllers]")
		return 2
	}
	if *logFile != "" {
		// Redirect the file descriptor itself, so that every log of every library (klog, zap,
		// grpc), panics, and the child process's output all go to the file.
		f, err := os.OpenFile(*logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "real-apiserver:", err)
			return 1
		}
		if err := unix.Dup2(int(f.Fd()), 2); err != nil {
			fmt.Fprintln(os.Stderr, "real-apiserver:", err)
			return 1
		}
		f.Close()
	}

	// From here on, SIGTERM/SIGINT only cancel ctx; cleanup always runs.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if err := serve(ctx, *kubeconfig, *port, !*noControllers); err != nil {
		fmt.Fprintln(os.Stderr, "real-apiserver:", err)
		return 1
	}
	return 0
}

// serve runs everything (the controller manager only if withControllers) until ctx is
// cancelled (nil) or something fails (an error). Every component started is stopped and
// every temporary file removed before it returns.
func serve(ctx context.Context, kubeconfigPath string, port int, withControllers bool) error {
	runDir, release, err := makeRunDir()
	if err != nil {
		return err
	}
	defer release()

	pki, err := writePKI(filepath.Join(runDir, "pki"))
	if err != nil {
		return err
	}

	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	if port == 0 {
		port = ports[2]
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", port)

	etcdURL, stopEtcd, err := startEtcd(filepath.Join(runDir, "etcd"), ports[0], ports[1])
	if err != nil {
		return err
	}
	defer stopEtcd()

	// The controller manager gets its own copy: the user may move or delete theirs.
	internalKubeconfig := filepath.Join(runDir, "pki", "admin.kubeconfig")
	for _, path := range []string{internalKubeconfig, kubeconfigPath} {
		if err := writeKubeconfig(path, server, pki); err != nil {
			return err
		}
	}

	apiCtx, stopAPI := context.WithCancel(context.Background())
	apiDone := make(chan error, 1)
	go func() { apiDone <- runAPIServer(apiCtx, apiServerArgs(etcdURL, port, pki)) }()
	defer func() {
		stopAPI()
		select {
		case <-apiDone:
		case <-time.After(60 * time.Second):
			fmt.Fprintln(os.Stderr, "real-apiserver: the API server did not stop in 60s")
		}
	}()

	client, err := pki.httpClient()
	if err != nil {
		return err
	}
	// Not interruptible: the API server stopped before its post-start hooks have passed
	// exits the process at once (klog.Fatal), skipping all cleanup. A signal now is acted
	// upon when ready, a few seconds later.
	if err := waitFor(context.Background(), apiDone, nil, 3*time.Minute, "/readyz", func() bool {
		return get(client, server+"/readyz") == http.StatusOK
	}); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}

	// Without controllers, kcmDone stays nil: a receive from it never happens.
	var kcmDone chan error
	if withControllers {
		var kcm *exec.Cmd
		kcm, kcmDone, err = startControllerManager(internalKubeconfig, pki)
		if err != nil {
			return err
		}
		defer stopProcess(kcm, kcmDone)

		// The "default" ServiceAccount appears once the controllers run: the server is then
		// ready as a cluster, not only as an API.
		if err := waitFor(ctx, apiDone, kcmDone, 2*time.Minute, "the default ServiceAccount", func() bool {
			return get(client, server+"/api/v1/namespaces/default/serviceaccounts/default") == http.StatusOK
		}); err != nil {
			if ctx.Err() != nil {
				return nil // stopped by a signal: not a failure
			}
			return err
		}
	}

	fmt.Fprintf(os.Stdout, "listening on %s\n", server) // os.Stdout is not buffered
	select {
	case <-ctx.Done():
		return nil
	case err := <-apiDone:
		apiDone <- err // for the deferred wait
		return fmt.Errorf("the API server stopped: %v", err)
	case err := <-kcmDone:
		kcmDone <- err
		return fmt.Errorf("the controller manager stopped: %v", err)
	}
}

func apiServerArgs(etcdURL string, port int, pki *pki) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		// Without it, the server advertises (in the "kubernetes" Endpoints) the address of
		// some network interface, and fails to start on a machine with none but loopback.
		"--advertise-address=127.0.0.1",
		// ... but a loopback address is invalid in Endpoints: the "kubernetes" Service's
		// endpoints reconciler would fail to write them, and log it. Leave them empty.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + pki.servingCert,
		"--tls-private-key-file=" + pki.servingKey,
		"--client-ca-file=" + pki.caCert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saPublicKey,
		"--service-account-signing-key-file=" + pki.saPrivateKey,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--feature-gates=" + featureGates,
		// The server's own metrics and profiling are of no use here.
		"--profiling=false",
	}
}

// startControllerManager re-executes this binary as kube-controller-manager.
func startControllerManager(kubeconfig string, pki *pki) (*exec.Cmd, chan error, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self, controllerManagerMode,
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0", // no health or metrics endpoint: nobody would query it
		"--service-account-private-key-file="+pki.saPrivateKey,
		"--root-ca-file="+pki.caCert,
		"--feature-gates="+featureGates,
	)
	cmd.Stdout = os.Stderr // stdout is only for the "listening on" line
	cmd.Stderr = os.Stderr
	// If this process is killed (even with SIGKILL), the kernel kills the child too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The kernel sends Pdeathsig when the thread that forked the child exits, not the
	// process: the goroutine keeps its thread locked (and alive) until the child is gone.
	started := make(chan error)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, nil, err
	}
	return cmd, done, nil
}

func stopProcess(cmd *exec.Cmd, done chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// waitFor polls check until it holds, ctx is cancelled, a component stops, or timeout passes.
func waitFor(ctx context.Context, apiDone, kcmDone chan error, timeout time.Duration, what string, check func() bool) error {
	deadline := time.After(timeout)
	for !check() {
		select {
		case <-ctx.Done():
			return errors.New("interrupted while waiting for " + what)
		case err := <-apiDone:
			apiDone <- err
			return fmt.Errorf("the API server stopped: %v", err)
		case err := <-kcmDone:
			kcmDone <- err
			return fmt.Errorf("the controller manager stopped: %v", err)
		case <-deadline:
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func get(client *http.Client, url string) int {
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// freePorts finds n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are chosen, so that they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// makeRunDir creates this run's folder, TMPDIR/kopf-rs-real-apiserver/run-PID, and removes
// those of earlier runs that died without cleaning up (SIGKILL). A run holds an exclusive
// flock on run-PID.lock for its whole life; the kernel releases it when the process dies,
// however it dies, so a lock that can be taken marks a dead run (even if its pid was reused).
func makeRunDir() (string, func(), error) {
	parent := filepath.Join(os.TempDir(), "kopf-rs-real-apiserver")
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("run-%d", os.Getpid())
	lock, err := os.OpenFile(filepath.Join(parent, name+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return "", nil, fmt.Errorf("locking %s: %v", lock.Name(), err)
	}
	removeStaleRuns(parent, name)
	dir := filepath.Join(parent, name)
	_ = os.RemoveAll(dir) // of a dead run with the same pid
	if err := os.Mkdir(dir, 0o700); err != nil {
		lock.Close()
		return "", nil, err
	}
	release := func() {
		_ = os.RemoveAll(dir)
		_ = os.Remove(lock.Name())
		lock.Close()
		_ = os.Remove(parent) // only if empty: other runs may be alive
	}
	return dir, release, nil
}

func removeStaleRuns(parent, self string) {
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".lock")
		if name == self || !strings.HasPrefix(name, "run-") {
			continue
		}
		lockPath := filepath.Join(parent, name+".lock")
		lock, err := os.OpenFile(lockPath, os.O_RDWR, 0)
		if err != nil {
			if !os.IsNotExist(err) {
				continue
			}
			// No lock file: only if its pid is gone (it may be starting right now).
			pid, _ := strconv.Atoi(strings.TrimPrefix(name, "run-"))
			if pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
				continue
			}
			_ = os.RemoveAll(filepath.Join(parent, name))
			continue
		}
		if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			_ = os.RemoveAll(filepath.Join(parent, name))
			_ = os.Remove(lockPath)
		}
		lock.Close()
	}
}
