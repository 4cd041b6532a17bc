// Package stack runs Loom locally: a real Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, built by `make control-plane`),
// an embedded NATS server with JetStream, Loom's CRDs, and every Loom
// service as its own OS process with its own ServiceAccount and the RBAC
// the Helm chart gives it. It is the one harness behind `loomctl dev up`,
// the end-to-end tests and the benchmarks.
//
// # Use from a test
//
//	s, err := stack.Start(t.Context(), stack.Options{
//		StateDir: t.TempDir(),
//		Log:      t.Output(),
//	})
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { _ = s.Stop(context.Background()) })
//	objs, err := s.Apply(ctx, "testdata/claim.yaml")
//	...
//	err = s.WaitReady(ctx, objs)
//
// RepoRoot defaults to the checkout around the working directory (go test
// runs in the package folder, inside it). Binaries come from $LOOM_BIN_DIR
// and $LOOM_K8S_BIN_DIR, which the Makefile exports, else from bin/ and
// .cache/k8s/<KubernetesVersion>/.
//
// # API
//
//	func Start(ctx context.Context, opts Options) (*Stack, error)
//	func (s *Stack) Stop(ctx context.Context) error
//	func (s *Stack) AdminKubeconfig() string
//	func (s *Stack) RESTConfig() *rest.Config
//	func (s *Stack) NATSURL() string
//	func (s *Stack) ServiceNATSURL(service string) string
//	func (s *Stack) ServiceKubeconfig(service string) string
//	func (s *Stack) StateDir() string
//	func (s *Stack) LogPath(process string) string
//	func (s *Stack) KillService(service string, replica int) error
//	func (s *Stack) ServicePID(service string, replica int) int
//	func (s *Stack) ServiceHealthAddr(service string, replica int) string
//	func (s *Stack) RestartNATS(ctx context.Context) error
//	func (s *Stack) RestartAPIServer(ctx context.Context) error
//	func (s *Stack) Apply(ctx context.Context, paths ...string) ([]*unstructured.Unstructured, error)
//	func (s *Stack) ApplyObjects(ctx context.Context, objs ...*unstructured.Unstructured) ([]*unstructured.Unstructured, error)
//	func (s *Stack) Claims(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error)
//	func (s *Stack) WaitReady(ctx context.Context, objs []*unstructured.Unstructured) error
//	func ReadManifests(paths ...string) ([]*unstructured.Unstructured, error)
//	func DecodeManifests(b []byte) ([]*unstructured.Unstructured, error)
//	func ReadInfo(stateDir string) (Info, error)
//	func FindRepoRoot(dir string) (string, error)
//	func ServiceAccountName(service string) string
//
// # Processes
//
// Every entry of Options.Services is a binary <BinDir>/<name> (the four
// Loom services, rbac-manager, admission, and provider-nop, the test
// provider; the last three accept the NATS flags and ignore them). The stack runs
// Options.Replicas[name] replicas (default 1) of each, as
//
//	<BinDir>/<name> --kubeconfig=<StateDir>/kubeconfigs/loom-<name>.kubeconfig \
//	    --nats-url=nats://127.0.0.1:<port> --replica-id=<name>-<i> \
//	    --health-addr=127.0.0.1:<port>
//
// with LOOM_BUS_REPLICAS in its environment (the replica count of Loom's
// JetStream objects: 1, or 3 on a NATS cluster), and LOOM_NATS_USER and
// LOOM_NATS_PASSWORD: its own NATS user.
//
// The renderer hands the secrets service the connection details of Pipeline
// XRs over gRPC with mutual TLS. The stack issues, from its CA (the control
// plane's; on an existing cluster a CA of its own), a server certificate
// for loom-secrets and 127.0.0.1 and a client certificate for
// loom-renderer (pki/secrets-grpc-*), gives each secrets replica a loopback
// port (LOOM_SECRETS_GRPC_ADDR and the LOOM_SECRETS_GRPC_* files), and
// gives the renderer every replica's address
// (LOOM_RENDERER_SECRETS_ENDPOINT, used round robin, and the
// LOOM_RENDERER_SECRETS_* files). Options.Env may override any of them;
// an empty LOOM_RENDERER_SECRETS_ENDPOINT turns the channel off.
//
// The admission component serves validating webhooks. The stack issues a
// CA of its own and a serving certificate for 127.0.0.1 only
// (pki/admission-webhook.*), gives each replica a loopback port
// (LOOM_ADMISSION_WEBHOOK_ADDR and the LOOM_ADMISSION_TLS_* files), and,
// once the replicas are ready, installs the webhook configurations of the
// chart's files/admission/webhooks.yaml pointing at replica 0
// (https://127.0.0.1:<port>/<path>) with that CA bundle, so that the
// stack's kube-apiserver calls it. Against an existing cluster, whose API
// server cannot reach a loopback address, no webhook is registered.
//
// # NATS
//
// NATS runs inside the harness process. Options.NATSServers of 3 to 5 start
// a JetStream cluster (loom-local) on loopback: servers loom-local-<i>, each
// with its own store nats/n<i> and log logs/nats-<i>.log; --nats-url then
// lists every server, comma-separated. KillNATSServer and StartNATSServer
// take one server away and bring it back (same ports, same store);
// RestartNATS restarts them all.
//
// The servers enforce the same authorization as production (pkg/natsauth):
// each process runs as its own user, loom-<name>, allowed only its
// service's subjects (a process that is not a Loom service may connect and
// nothing more), so the end-to-end tests prove those permissions suffice.
// Passwords are random per stack. NATSURL and NATSURLs carry the user
// loom-admin, who may do anything (tests, loomctl); ServiceNATSURL carries a
// service's own user, to test what it may not do.
//
// and considers a replica started once GET http://<health-addr>/readyz
// answers 200. pkg/service implements that contract for every main. A
// replica that exits is restarted with exponential backoff (200ms up to
// 10s) until Stop; KillService sends it SIGKILL to test exactly that.
//
// Every process runs in its own process group with Pdeathsig set, so it
// dies with the harness even if the harness is killed with SIGKILL.
//
// # State folder
//
//	stack.lock                 held while the stack runs (flock)
//	stack.json                 Info for other programs (ReadInfo)
//	kubeconfig                 admin kubeconfig (system:masters)
//	kubeconfigs/loom-<svc>.kubeconfig
//	pki/                       CA, serving and client certificates, SA keys
//	etcd/, nats/               etcd data, JetStream store
//	logs/<process>.log         etcd, kube-apiserver, kube-controller-manager,
//	                           nats, <service>-<replica>
//
// Start removes all of these (except the lock) that a previous stack left:
// a stack is disposable. Other files in the folder are left alone.
//
// # Existing clusters
//
// With Options.Kubeconfig the stack starts no control plane: it installs
// the CRDs, ServiceAccounts and RBAC into that cluster and runs the
// services against it, still with the embedded NATS server. Stop then
// stops only the services and NATS; what was installed stays.
package stack
