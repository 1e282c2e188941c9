package framework

import (
	"context"
	"fmt"
	"os"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// ServiceAccountKubeconfig writes a kubeconfig to path that authenticates
// as ServiceAccount namespace/name with a token from the TokenRequest API,
// as a pod of that ServiceAccount would: a process run with it has exactly
// the RBAC the ServiceAccount is bound to.
func ServiceAccountKubeconfig(ctx context.Context, admin *rest.Config, namespace, name, path string) error {
	token, err := ServiceAccountToken(ctx, admin, namespace, name)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["plane"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "plane", AuthInfo: name, Namespace: namespace}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return os.Chmod(path, 0o600)
}

// ServiceAccountToken is a token for ServiceAccount namespace/name from
// the TokenRequest API, valid for an hour.
func ServiceAccountToken(ctx context.Context, admin *rest.Config, namespace, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return "", fmt.Errorf("creating clientset: %w", err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}
