package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/certs"
	"github.com/berth-dev/berth/test/berthproc"
	"github.com/berth-dev/berth/test/framework"
)

const namespace = "berth-system"

var secretKey = types.NamespacedName{Namespace: namespace, Name: "berth-webhook-certs"}

var _ = Describe("self-managed webhook certificates", Ordered, func() {
	var (
		balancer *framework.Balancer
		replicas []*berthproc.Process
		dirs     []string
		ports    []int
	)

	BeforeAll(func(ctx SpecContext) {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
		// The install ships the Secret empty; cert-controller fills it.
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretKey.Name}})).To(Succeed())
		for range 2 {
			p, err := berthproc.FreePort()
			Expect(err).NotTo(HaveOccurred())
			ports = append(ports, p)
		}
		var err error
		balancer, err = framework.NewBalancer(context.Background(),
			"127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1]))
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.InstallWebhooks(ctx, k8s, "https://localhost:"+portOf(balancer.Addr), nil)).To(Succeed())
		volumes, stop := context.WithCancel(context.Background())
		DeferCleanup(stop)
		for i, port := range ports {
			dir := filepath.Join(GinkgoT().TempDir(), "certs")
			dirs = append(dirs, dir)
			go func() {
				defer GinkgoRecover()
				Expect(framework.SecretVolume(volumes, k8s, secretKey, dir, 200*time.Millisecond)).To(Succeed())
			}()
			p, err := berthproc.Start(ctx, berthproc.Options{
				Bin: berthPath, Kubeconfig: plane.Kubeconfig, ReadyTimeout: 3 * time.Minute,
				LogPath: filepath.Join(GinkgoT().TempDir(), fmt.Sprintf("berth-%d.log", i)),
				Args: []string{
					"--namespace=" + namespace, "--metrics-bind-address=0",
					"--webhook-port=" + strconv.Itoa(port), "--webhook-cert-dir=" + dir,
					"--webhook-cert-dns-names=localhost",
					// A serving certificate lives a minute and is renewed
					// with 45 s left: a renewal every ~15 s.
					"--webhook-cert-validity=60s", "--webhook-cert-renew-before=45s", "--webhook-cert-check-interval=2s",
				},
			})
			Expect(err).NotTo(HaveOccurred())
			replicas = append(replicas, p)
			DeferCleanup(func() {
				Expect(p.Stop()).To(Succeed())
				AddReportEntry(fmt.Sprintf("berth-%d log", i), berthproc.Tail(p.LogPath))
			})
		}
	}, NodeTimeout(8*time.Minute))

	It("renews the serving certificate under two replicas without a failed webhook call", func(ctx SpecContext) {
		first := secret(ctx)
		Expect(first.Data).To(HaveKey(certs.CertKey), "the rotator fills the Secret")
		calls := startCalls(4)
		seen := map[string]bool{}
		Eventually(func(g Gomega) {
			s := secret(ctx)
			seen[string(s.Data[certs.CertKey])] = true
			g.Expect(s.Data[certs.CAKey]).To(Equal(first.Data[certs.CAKey]), "a renewal keeps the CA")
			g.Expect(len(seen)).To(BeNumerically(">=", 4), "three renewals")
		}).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		ok, failed := calls.stop()
		Expect(failed).To(BeEmpty(), "webhook calls failed during renewal")
		Expect(ok).To(BeNumerically(">", 100))
		Expect(balancer.Served()).To(HaveEach(BeNumerically(">", 0)), "both replicas served webhook calls")

		latest := secret(ctx)
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(latest.Data[certs.CAKey])).To(BeTrue())
		for i, p := range replicas {
			Expect(p.Running()).To(Succeed(), "renewal needs no restart")
			// Each replica reloads its files: it serves the newest
			// certificate without restarting.
			Eventually(func(g Gomega) {
				served := servedCertificate(g, ports[i], pool)
				want := secret(ctx).Data[certs.CertKey]
				g.Expect(pemOf(served)).To(Equal(want))
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "replica %d serves the current certificate", i)
			Expect(dirs[i]).To(BeADirectory())
		}
		for _, name := range []string{certs.MutatingWebhookConfiguration, certs.ValidatingWebhookConfiguration} {
			Expect(caBundles(ctx, name)).To(HaveEach(Equal(latest.Data[certs.CAKey])), "%s trusts the CA", name)
		}
	}, SpecTimeout(6*time.Minute))

	certificateFaultSpecs(func() {
		for _, p := range replicas {
			Expect(p.Stop()).To(Succeed())
		}
	})
})

func secret(ctx context.Context) *corev1.Secret {
	s := &corev1.Secret{}
	ExpectWithOffset(1, k8s.Get(ctx, secretKey, s)).To(Succeed())
	return s
}

func portOf(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return port
}

func pemOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// calls keeps the API server calling berth's webhooks: dry-run creates of
// a queued Job (the mutating webhook suspends it) and of a ClusterQueue
// (the validating webhook checks it).
type calls struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ok     atomic.Int64
	mu     sync.Mutex
	failed []string
}

func startCalls(workers int) *calls {
	ctx, cancel := context.WithCancel(context.Background())
	c := &calls{cancel: cancel}
	for w := range workers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			// One call per worker every 20 ms: a steady load, not a flood.
			pace := time.NewTicker(20 * time.Millisecond)
			defer pace.Stop()
			for i := 0; ctx.Err() == nil; i++ {
				err := call(ctx, w, i)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					c.mu.Lock()
					c.failed = append(c.failed, err.Error())
					c.mu.Unlock()
				} else {
					c.ok.Add(1)
				}
				select {
				case <-ctx.Done():
				case <-pace.C:
				}
			}
		}()
	}
	return c
}

func (c *calls) stop() (int64, []string) {
	c.cancel()
	c.wg.Wait()
	return c.ok.Load(), c.failed
}

func call(ctx context.Context, worker, i int) error {
	name := fmt.Sprintf("call-%d-%d", worker, i)
	if i%2 == 1 {
		cq := &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}}
		return k8s.Create(ctx, cq, client.DryRunAll)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
		}}},
	}
	if err := k8s.Create(ctx, job, client.DryRunAll); err != nil {
		return err
	}
	if !ptr.Deref(job.Spec.Suspend, false) {
		return errors.New("a queued Job passed without the mutating webhook suspending it")
	}
	return nil
}

// servedCertificate is the leaf certificate replica port presents for
// localhost, verified against pool.
func servedCertificate(g Gomega, port int, pool *x509.CertPool) *x509.Certificate {
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port), &tls.Config{ServerName: "localhost", RootCAs: pool})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0]
}

func caBundles(ctx context.Context, name string) [][]byte {
	var out [][]byte
	m := &admissionv1.MutatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, m); err == nil {
		for _, w := range m.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
		return out
	}
	v := &admissionv1.ValidatingWebhookConfiguration{}
	ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKey{Name: name}, v)).To(Succeed())
	for _, w := range v.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	return out
}
