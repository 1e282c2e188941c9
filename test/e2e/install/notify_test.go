package install_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// expectSecretBoundary checks, with berth running as installed, that it
// can read a tenant's webhook Secret only once the tenant grants it that
// one Secret: the install gives berth no list, watch or get on Secrets
// outside its own namespace, and inside it only on its certificate's.
func expectSecretBoundary(ctx context.Context, deploy *appsv1.Deployment) {
	expectOwnSecretOnly(ctx, deploy)

	By("a tenant's NotificationPolicy: Ready only once berth is granted its Secret")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, ns))).To(Succeed()) })
	Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "slack"},
		StringData: map[string]string{"url": "https://hooks.slack.com/services/T000/B000/SECRET"}})).To(Succeed())
	np := &berthv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "chat"},
		Spec: berthv1.NotificationPolicySpec{NotificationSettings: berthv1.NotificationSettings{
			Sink: berthv1.NotificationSink{Type: berthv1.SinkSlack, URLSecretRef: &berthv1.SecretKeyRef{Name: "slack"}}}}}
	Expect(k8s.Create(ctx, np)).To(Succeed())
	Eventually(ready(ctx, np)).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Status", metav1.ConditionFalse), HaveField("Reason", berthv1.ReasonSecretNotReadable),
		HaveField("Message", ContainSubstring("berth may not read Secret "+ns.Name+"/slack: grant it"))))

	Expect(k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "berth-notify"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"slack"}, Verbs: []string{"get"}}},
	})).To(Succeed())
	Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "berth-notify"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "berth-notify"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: deploy.Namespace,
			Name: deploy.Spec.Template.Spec.ServiceAccountName}},
	})).To(Succeed())
	Eventually(ready(ctx, np)).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(interval).Should(
		HaveField("Status", metav1.ConditionTrue), "berth notices the grant without the policy being touched")
}

// ready reads a NotificationPolicy's Ready condition.
func ready(ctx context.Context, np *berthv1.NotificationPolicy) func(Gomega) metav1.Condition {
	return func(g Gomega) metav1.Condition {
		fresh := &berthv1.NotificationPolicy{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(np), fresh)).To(Succeed())
		c := meta.FindStatusCondition(fresh.Status.Conditions, berthv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		return *c
	}
}

// expectOwnSecretOnly checks, as berth's ServiceAccount, that berth cannot
// list the Secrets of its own namespace — a list returns their data — but
// can list and read its certificate Secret by name, which is what its
// certificate rotator does (with the metadata.name field selector the API
// server authorizes by name).
func expectOwnSecretOnly(ctx context.Context, deploy *appsv1.Deployment) {
	By("berth's identity lists no Secret of its namespace but its certificate's")
	var certSecret string
	for _, v := range deploy.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			certSecret = v.Secret.SecretName
		}
	}
	Expect(certSecret).NotTo(BeEmpty())
	cs, err := kubernetes.NewForConfig(berthConfig(ctx, deploy))
	Expect(err).NotTo(HaveOccurred())
	secrets := cs.CoreV1().Secrets(deploy.Namespace)

	_, err = secrets.List(ctx, metav1.ListOptions{})
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing every Secret of %s must be forbidden, got %v", deploy.Namespace, err)
	_, err = secrets.Get(ctx, "not-berths", metav1.GetOptions{})
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "reading another Secret of %s must be forbidden, got %v", deploy.Namespace, err)
	own, err := secrets.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + certSecret})
	Expect(err).NotTo(HaveOccurred(), "listing the certificate Secret by name")
	Expect(own.Items).To(HaveLen(1))
	_, err = secrets.Get(ctx, certSecret, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
}
