package envtest

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig writes a kubeconfig file whose current context, "envtest", is this API server as
// its admin, for the commands that take --kubeconfig; it returns the file's path.
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: e.Base.Host, CertificateAuthorityData: e.Base.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.Base.CertData, ClientKeyData: e.Base.KeyData, Token: e.Base.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("writing a kubeconfig: %v", err)
	}
	return path
}
