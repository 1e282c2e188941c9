package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/test/berthproc"
	"github.com/berth-dev/berth/test/framework"
)

// leaseDuration and renewDeadline are short so a failover takes seconds;
// the margin between them is what fences a paused leader's writes.
const (
	leaseDuration = 6 * time.Second
	renewDeadline = 4 * time.Second
	leaseName     = "berth-controller.berth.dev"
)

// replicaSet is berth-controller processes behind one webhook address.
type replicaSet struct {
	procs       []*berthproc.Process
	ports       []int // webhook ports
	metrics     []int // plain-HTTP metrics ports
	kubeconfigs []string
	args        []string
	balancer    *framework.Balancer
	cancel      context.CancelFunc
	started     int // processes started, for log names
}

// startReplicas starts a replica per kubeconfig, with args besides the
// usual, serving the webhooks where the plane's webhook configuration
// points, with the plane's serving certificate
// (--webhook-cert-management=external).
func startReplicas(ctx context.Context, kubeconfigs []string, args ...string) *replicaSet {
	n := len(kubeconfigs)
	s := &replicaSet{procs: make([]*berthproc.Process, n), ports: make([]int, n), metrics: make([]int, n), kubeconfigs: kubeconfigs, args: args}
	backends := make([]string, n)
	for i := range n {
		p, err := berthproc.FreePort()
		Expect(err).NotTo(HaveOccurred())
		s.ports[i] = p
		backends[i] = "127.0.0.1:" + strconv.Itoa(p)
		s.metrics[i], err = berthproc.FreePort()
		Expect(err).NotTo(HaveOccurred())
	}
	wh := plane.Env.WebhookInstallOptions
	bctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	var err error
	s.balancer, err = framework.NewBalancerOn(bctx, net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort)), backends...)
	Expect(err).NotTo(HaveOccurred())
	for i := range n {
		s.start(ctx, i)
	}
	return s
}

// close stops the replicas and the balancer, and waits until the
// balancer no longer holds the webhook address for the next spec.
func (s *replicaSet) close() {
	s.stopAll()
	s.cancel()
	s.balancer.Wait()
}

// start runs replica i (again).
func (s *replicaSet) start(ctx context.Context, i int) {
	s.started++
	p, err := berthproc.Start(ctx, berthproc.Options{
		Bin: berthPath, Kubeconfig: s.kubeconfigs[i], ReadyTimeout: 3 * time.Minute,
		LogPath: filepath.Join(GinkgoT().TempDir(), fmt.Sprintf("berth-%d-%d.log", i, s.started)),
		Args: append([]string{
			"--namespace=" + namespace,
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(s.metrics[i]), "--metrics-secure=false",
			"--webhook-port=" + strconv.Itoa(s.ports[i]), "--webhook-cert-management=external",
			"--webhook-cert-dir=" + plane.Env.WebhookInstallOptions.LocalServingCertDir,
			"--leader-elect-lease-duration=" + leaseDuration.String(), "--leader-elect-renew-deadline=" + renewDeadline.String(),
		}, s.args...),
	})
	Expect(err).NotTo(HaveOccurred())
	s.procs[i] = p
}

// stopAll stops the replicas (SIGTERM) and, when the spec failed, reports
// their logs' tails.
func (s *replicaSet) stopAll() {
	for i, p := range s.procs {
		if p == nil {
			continue
		}
		Expect(p.Stop()).To(Succeed())
		if CurrentSpecReport().Failed() {
			AddReportEntry(fmt.Sprintf("berth-%d log", i), berthproc.Tail(p.LogPath))
		}
	}
}

// lease reads berth's leader-election lease.
func lease(ctx context.Context, g Gomega) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: leaseName}, l)).To(Succeed())
	return l
}

// leader waits for a held lease and returns the replica holding it (the
// one whose log names the holder's identity) and the identity.
func (s *replicaSet) leader(ctx context.Context, not string) (int, string) {
	var idx int
	var holder string
	Eventually(func(g Gomega) {
		l := lease(ctx, g)
		g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
		holder = *l.Spec.HolderIdentity
		g.Expect(holder).NotTo(BeEmpty())
		g.Expect(holder).NotTo(Equal(not), "the lease has moved")
		idx = -1
		for i, p := range s.procs {
			if p != nil && p.Running() == nil && strings.Contains(p.Log(), holder) {
				idx = i
			}
		}
		g.Expect(idx).NotTo(Equal(-1), "a running replica holds lease %s", holder)
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	return idx, holder
}

// auditEntry is the part of an audit event the fencing check reads.
type auditEntry struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// writesBetween lists the writes user sent that reached the API server
// between from and to, leases and events aside (a stopping leader may
// release its lease and record that it stopped).
func writesBetween(user string, from, to time.Time) []string {
	f, err := os.Open(auditLog)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEntry
		Expect(json.Unmarshal(sc.Bytes(), &e)).To(Succeed())
		switch e.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
		default:
			continue
		}
		if e.User.Username != user || e.ObjectRef == nil || !e.RequestReceivedTimestamp.After(from) || e.RequestReceivedTimestamp.After(to) {
			continue
		}
		if r := e.ObjectRef.Resource; r == "leases" || r == "events" {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s/%s %s/%s at %s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Subresource,
			e.ObjectRef.Namespace, e.ObjectRef.Name, e.RequestReceivedTimestamp.Format(time.RFC3339Nano)))
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return out
}
