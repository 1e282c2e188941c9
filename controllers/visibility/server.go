// Package visibility serves visibility.berth.dev, an aggregated API that
// shows each queue's pending workloads in the order berth admits them, with
// why each waits. It answers from the leader's admission engine on request
// and writes nothing. See docs/visibility.md.
package visibility

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	basecompatibility "k8s.io/component-base/compatibility"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/apis/visibility/openapi"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

// Names the install gives the API's registration: the APIService the CA
// is injected into, and the Service in berth's namespace it points at.
const (
	APIServiceName   = "v1alpha1.visibility.berth.dev"
	ServiceName      = "berth-visibility"
	ServiceNamespace = "berth-system"
)

// Options configure the server.
type Options struct {
	// BindAddress (an IP; empty: every interface) and Port it listens on.
	BindAddress string
	Port        int
	// CertDir holds tls.crt and tls.key, reloaded when they change.
	CertDir string
	// Kubeconfig reaches the API server that authenticates and authorizes
	// callers (TokenReview, SubjectAccessReview and the front proxy's CA in
	// kube-system/extension-apiserver-authentication); empty means the
	// in-cluster config.
	Kubeconfig string
}

// Server is the aggregated API server, run by the manager on every replica:
// the leader answers, the others say they are not the leader.
type Server struct {
	server *genericapiserver.GenericAPIServer
}

// NeedLeaderElection is false: every replica serves, so the APIService is
// available across a failover; only the leader's engine has answers.
func (*Server) NeedLeaderElection() bool { return false }

// New builds the server; Start runs it.
func New(o Options, engine Engine, reader client.Reader) (*Server, error) {
	c, err := newCodecs()
	if err != nil {
		return nil, err
	}
	cfg, err := serverConfig(o, c)
	if err != nil {
		return nil, err
	}
	srv, err := cfg.Complete().New("berth-visibility", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("creating the visibility server: %w", err)
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(visv1.GroupVersion.Group, c.scheme, c.params, c.codecs)
	group.VersionedResourcesStorageMap[visv1.GroupVersion.Version] = map[string]rest.Storage{
		"clusterqueues":                  parent{singular: "clusterqueue"},
		"clusterqueues/pendingworkloads": &pending{engine: engine, reader: reader},
		"localqueues":                    parent{namespaced: true, singular: "localqueue"},
		"localqueues/pendingworkloads":   &pending{namespaced: true, engine: engine, reader: reader},
	}
	if err := srv.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("installing %s: %w", visv1.GroupVersion, err)
	}
	return &Server{server: srv}, nil
}

// serverConfig is the generic API server's configuration: serving with the
// certificate in o.CertDir, callers authenticated and authorized by
// delegation to the API server, OpenAPI from the generated definitions.
func serverConfig(o Options, c codecs) (*genericapiserver.RecommendedConfig, error) {
	cfg := genericapiserver.NewRecommendedConfig(c.codecs)
	// The library version this server is built with; it gates no feature
	// of this API.
	cfg.EffectiveVersion = basecompatibility.NewEffectiveVersionFromString("1.37", "", "")
	serving := genericoptions.NewSecureServingOptions().WithLoopback()
	if o.BindAddress != "" {
		// Empty keeps the default, every interface.
		serving.BindAddress = net.ParseIP(o.BindAddress)
	}
	serving.BindPort = o.Port
	serving.ServerCert.CertKey.CertFile = filepath.Join(o.CertDir, "tls.crt")
	serving.ServerCert.CertKey.KeyFile = filepath.Join(o.CertDir, "tls.key")
	if err := serving.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("visibility server serving: %w", err)
	}
	authn := genericoptions.NewDelegatingAuthenticationOptions()
	authn.RemoteKubeConfigFile = o.Kubeconfig
	if err := authn.ApplyTo(&cfg.Authentication, cfg.SecureServing, cfg.OpenAPIConfig); err != nil {
		return nil, fmt.Errorf("visibility server authentication: %w", err)
	}
	authz := genericoptions.NewDelegatingAuthorizationOptions()
	authz.RemoteKubeConfigFile = o.Kubeconfig
	if err := authz.ApplyTo(&cfg.Authorization); err != nil {
		return nil, fmt.Errorf("visibility server authorization: %w", err)
	}
	namer := openapinamer.NewDefinitionNamer(c.scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title, cfg.OpenAPIConfig.Info.Version = "berth visibility", visv1.GroupVersion.Version
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title, cfg.OpenAPIV3Config.Info.Version = "berth visibility", visv1.GroupVersion.Version
	return cfg, nil
}

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	if err := s.server.PrepareRun().RunWithContext(ctx); err != nil {
		return fmt.Errorf("visibility server: %w", err)
	}
	return nil
}
