package install_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/controllers/certs"
	"github.com/berth-dev/berth/test/berthproc"
	"github.com/berth-dev/berth/test/framework"
)

var _ = Describe("installing berth", Ordered, func() {
	It("works from the release bundle applied server-side", func(ctx SpecContext) {
		objs, err := decode(readFile("install.yaml"))
		Expect(err).NotTo(HaveOccurred())
		exercise(ctx, objs)
	}, SpecTimeout(15*time.Minute))

	It("works from the Helm chart rendered by the Helm SDK", func(ctx SpecContext) {
		const namespace = "berth-helm"
		rendered := filepath.Join(GinkgoT().TempDir(), "chart.yaml")
		render := exec.CommandContext(ctx, "go", "run", "./cmd/berth-release", "render",
			"--chart", filepath.Join(dist, "berth-"+version+".tgz"),
			"--namespace", namespace, "--release", "berth", "--out", rendered)
		render.Dir = filepath.Join(framework.RepoRoot(), "test", "tools", "release")
		render.Stdout, render.Stderr = GinkgoWriter, GinkgoWriter
		Expect(render.Run()).To(Succeed(), "rendering the chart")
		data, err := os.ReadFile(rendered)
		Expect(err).NotTo(HaveOccurred())
		objs, err := decode(data)
		Expect(err).NotTo(HaveOccurred())
		// Helm installs into a namespace that exists; the platform team
		// labels it restricted, as the bundle's own Namespace is.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		exercise(ctx, objs)
		Expect(k8s.Delete(ctx, ns)).To(Succeed())
	}, SpecTimeout(15*time.Minute))
})

// exercise installs objs, proves the pods pass the restricted profile,
// runs berth as the installed ServiceAccount — first with one RBAC rule
// removed, which must stop admission, then as installed — admits the
// sample job end to end, scrapes the secured metrics, reads the visibility
// API as an admin and as a tenant, makes a tenant's edits of LocalQueues and
// Workloads that the tenant roles and policies refuse, checks the API
// Priority and Fairness level of berth's requests, and uninstalls.
func exercise(ctx context.Context, objs []*unstructured.Unstructured) {
	Expect(apply(ctx, objs)).To(Succeed())
	deploy := deployment(objs)
	expectRestricted(ctx, deploy)
	pointWebhooks(ctx)

	By("running berth without its ClusterRole's rule for Workloads")
	role := named(objs, "ClusterRole", clusterRoleOf(ctx, deploy))
	broken, removed := withoutRule(role, "berth.dev", "workloads")
	Expect(apply(ctx, []*unstructured.Unstructured{broken})).To(Succeed())
	// berth waits for its caches before it serves: without the rule it
	// never becomes ready, and says why.
	_, log, err := startBerth(ctx, deploy, 30*time.Second)
	Expect(err).To(MatchError(ContainSubstring("not ready within")), "a berth that may not read Workloads must not become ready")
	Expect(log()).To(ContainSubstring("workloads.berth.dev is forbidden"), "the missing rule (%v) is what stops it", removed.Verbs)

	By("running berth with the RBAC the install grants")
	Expect(apply(ctx, []*unstructured.Unstructured{role})).To(Succeed())
	berth := runBerth(ctx, deploy)
	samples := applySamples(ctx)
	first, second := submitSample(ctx), submitSample(ctx)
	for _, job := range []*batchv1.Job{first, second} {
		Eventually(completed(ctx, job)).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(interval).
			Should(BeTrue(), "job %s runs to completion", job.Name)
	}
	expectSecureMetrics(ctx, berth, objs)
	expectVisibility(ctx, deploy.Namespace)
	expectTenantBoundary(ctx)
	expectSecretBoundary(ctx, deploy)
	expectWorkloadHigh(ctx, deploy)
	Expect(forbidden(berth.Log())).To(BeEmpty(), "berth needs no permission the install lacks")

	By("uninstalling")
	// The samples go while berth runs: its finalizers need it.
	uninstall(ctx, samples)
	Expect(berth.Stop()).To(Succeed())
	uninstall(ctx, objs)
}

// forbidden are the lines of log that report a request RBAC denied.
func forbidden(log string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, "is forbidden") {
			out = append(out, line)
		}
	}
	return out
}

// expectRestricted checks that the Deployment's pods were admitted in a
// namespace that enforces the restricted profile — and that the profile is
// enforced there, so the check cannot pass vacuously.
func expectRestricted(ctx context.Context, deploy *appsv1.Deployment) {
	nsObj := &corev1.Namespace{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: deploy.Namespace}, nsObj)).To(Succeed())
	Expect(nsObj.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
	plain := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: deploy.Namespace, Name: "not-restricted"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	err := k8s.Create(ctx, plain)
	Expect(err).To(MatchError(ContainSubstring("violates PodSecurity \"restricted")), "the namespace enforces restricted")
	selector, err := metav1.LabelSelectorAsSelector(deploy.Spec.Selector)
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(deploy.Namespace), client.MatchingLabelsSelector{Selector: selector})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(int(ptr.Deref(deploy.Spec.Replicas, 1))))
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the Deployment's pods pass Pod Security admission")
}

// pointWebhooks points the installed webhook configurations at where the
// process-run berth will listen: by URL, since no pod backs the Service.
// berth's certificate management still injects the CA.
func pointWebhooks(ctx context.Context) {
	port, err := berthproc.FreePort()
	Expect(err).NotTo(HaveOccurred())
	webhookPort = port
	base := "https://localhost:" + strconv.Itoa(port)
	point := func(cc *admissionv1.WebhookClientConfig) {
		url := base + ptr.Deref(cc.Service.Path, "/")
		cc.Service, cc.URL = nil, &url
	}
	m := &admissionv1.MutatingWebhookConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: certs.MutatingWebhookConfiguration}, m)).To(Succeed())
	for i := range m.Webhooks {
		point(&m.Webhooks[i].ClientConfig)
	}
	Expect(k8s.Update(ctx, m)).To(Succeed())
	v := &admissionv1.ValidatingWebhookConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: certs.ValidatingWebhookConfiguration}, v)).To(Succeed())
	for i := range v.Webhooks {
		point(&v.Webhooks[i].ClientConfig)
	}
	Expect(k8s.Update(ctx, v)).To(Succeed())
}

// webhookPort is where pointWebhooks sent the webhook calls.
var webhookPort int

// clusterRoleOf is the ClusterRole bound to the Deployment's
// ServiceAccount that grants berth's API access.
func clusterRoleOf(ctx context.Context, deploy *appsv1.Deployment) string {
	bindings := &rbacv1.ClusterRoleBindingList{}
	Expect(k8s.List(ctx, bindings)).To(Succeed())
	for _, b := range bindings.Items {
		for _, s := range b.Subjects {
			// The other binding is the visibility server's system:auth-delegator.
			if s.Kind == "ServiceAccount" && s.Namespace == deploy.Namespace && s.Name == deploy.Spec.Template.Spec.ServiceAccountName &&
				strings.HasPrefix(b.RoleRef.Name, "berth-") {
				return b.RoleRef.Name
			}
		}
	}
	Fail("no ClusterRoleBinding for berth's ServiceAccount")
	return ""
}

// runBerth runs berth-controller as startBerth does and waits for it to
// be ready.
func runBerth(ctx context.Context, deploy *appsv1.Deployment) *berthproc.Process {
	p, _, err := startBerth(ctx, deploy, 3*time.Minute)
	Expect(err).NotTo(HaveOccurred())
	return p
}

// startBerth runs berth-controller with the Deployment's flags, as its
// ServiceAccount, with the certificate Secret projected as the kubelet
// would mount it, and returns it with a reader of its whole log.
func startBerth(ctx context.Context, deploy *appsv1.Deployment, ready time.Duration) (*berthproc.Process, func() string, error) {
	spec := deploy.Spec.Template.Spec
	dir := GinkgoT().TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	Expect(framework.ServiceAccountKubeconfig(ctx, plane.Config, deploy.Namespace, spec.ServiceAccountName, kubeconfig)).To(Succeed())
	var secret string
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	Expect(secret).NotTo(BeEmpty(), "the Deployment mounts the certificate Secret")
	certDir := filepath.Join(dir, "certs")
	volume, stop := context.WithCancel(context.Background())
	DeferCleanup(stop)
	go func() {
		defer GinkgoRecover()
		Expect(framework.SecretVolume(volume, k8s, types.NamespacedName{Namespace: deploy.Namespace, Name: secret}, certDir, 200*time.Millisecond)).To(Succeed())
	}()
	metricsPort, err := berthproc.FreePort()
	Expect(err).NotTo(HaveOccurred())
	visibilityPort, err = berthproc.FreePort()
	Expect(err).NotTo(HaveOccurred())
	args := override(spec.Containers[0].Args, map[string]string{
		"visibility-port":        strconv.Itoa(visibilityPort),
		"namespace":              deploy.Namespace,
		"webhook-port":           strconv.Itoa(webhookPort),
		"webhook-cert-dir":       certDir,
		"webhook-cert-dns-names": "localhost",
		"metrics-bind-address":   "127.0.0.1:" + strconv.Itoa(metricsPort),
	})
	logPath := filepath.Join(dir, "berth.log")
	log := func() string {
		data, _ := os.ReadFile(logPath)
		return string(data)
	}
	p, err := berthproc.Start(ctx, berthproc.Options{Bin: berthPath, Kubeconfig: kubeconfig, Args: args,
		LogPath: logPath, ReadyTimeout: ready})
	if err != nil {
		return nil, log, err
	}
	DeferCleanup(func() {
		AddReportEntry("berth log", berthproc.Tail(p.LogPath))
		Expect(p.Stop()).To(Succeed())
	})
	metricsURL = fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort)
	return p, log, nil
}

// metricsURL is the running berth's metrics endpoint.
var metricsURL string

// applySamples applies the flavor, queues and namespaces of config/samples.
func applySamples(ctx context.Context) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for _, f := range []string{"resourceflavor.yaml", "clusterqueues.yaml", "localqueues.yaml"} {
		data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", f))
		Expect(err).NotTo(HaveOccurred())
		part, err := decode(data)
		Expect(err).NotTo(HaveOccurred())
		objs = append(objs, part...)
	}
	Expect(apply(ctx, objs)).To(Succeed())
	return objs
}

// submitSample creates config/samples/job.yaml.
func submitSample(ctx context.Context) *batchv1.Job {
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", "job.yaml"))
	Expect(err).NotTo(HaveOccurred())
	objs, err := decode(data)
	Expect(err).NotTo(HaveOccurred())
	job := findTyped(objs, "Job", &batchv1.Job{})
	Expect(k8s.Create(ctx, job)).To(Succeed())
	Expect(ptr.Deref(job.Spec.Suspend, false)).To(BeTrue(), "berth's webhook holds the job")
	return job
}

func completed(ctx context.Context, job *batchv1.Job) func() bool {
	return func() bool {
		fresh := &batchv1.Job{}
		if k8s.Get(ctx, client.ObjectKeyFromObject(job), fresh) != nil {
			return false
		}
		for _, c := range fresh.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}
}

// expectSecureMetrics scrapes berth's metrics as nobody (401), as a
// ServiceAccount without the reader role (403) and with it (200).
func expectSecureMetrics(ctx context.Context, berth *berthproc.Process, objs []*unstructured.Unstructured) {
	const ns, name = "monitoring", "prometheus"
	Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))).To(Succeed())
	token, err := framework.ServiceAccountToken(ctx, plane.Config, ns, name)
	Expect(err).NotTo(HaveOccurred())
	Expect(scrape(ctx, "")).To(HaveField("Code", http.StatusUnauthorized))
	Expect(scrape(ctx, token)).To(HaveField("Code", http.StatusForbidden))
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-berth-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader(objs).Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
	}
	Expect(k8s.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(k8s.Delete(ctx, binding)).To(Succeed()) })
	// controller-runtime caches authorization decisions briefly.
	Eventually(func() scraped { return scrape(ctx, token) }).WithContext(ctx).WithTimeout(timeout).WithPolling(time.Second).
		Should(And(HaveField("Code", http.StatusOK), HaveField("Body", ContainSubstring("berth_build_info{"))))
	Expect(berth.Running()).To(Succeed())
}

type scraped struct {
	Code int
	Body string
}

func scrape(ctx context.Context, token string) scraped {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The metrics certificate is self-signed; scrapers skip verification,
	// as the ServiceMonitor does.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return scraped{Code: resp.StatusCode, Body: string(body)}
}
