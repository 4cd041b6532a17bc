module github.com/loomxr/loom/proto

go 1.26.0

replace (
	github.com/loomxr/loom/cmd/loomctl => ../cmd/loomctl
	github.com/loomxr/loom/e2e => ../e2e
	github.com/loomxr/loom/pkg => ../pkg
	github.com/loomxr/loom/services/admission => ../services/admission
	github.com/loomxr/loom/services/binder => ../services/binder
	github.com/loomxr/loom/services/rbac-manager => ../services/rbac-manager
	github.com/loomxr/loom/services/renderer => ../services/renderer
	github.com/loomxr/loom/services/secrets => ../services/secrets
	github.com/loomxr/loom/services/watcher => ../services/watcher
)

require (
	google.golang.org/grpc v1.81.1
	google.golang.org/protobuf v1.36.11
)

require (
	golang.org/x/net v0.51.0 // indirect
	golang.org/x/sys v0.42.0 // indirect
	golang.org/x/text v0.34.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260226221140-a57be14db171 // indirect
)
