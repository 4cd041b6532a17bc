module github.com/loomxr/loom/proto

go 1.26.0

replace (
	github.com/loomxr/loom/cmd/loomctl => ../cmd/loomctl
	github.com/loomxr/loom/e2e => ../e2e
	github.com/loomxr/loom/pkg => ../pkg
	github.com/loomxr/loom/services/binder => ../services/binder
	github.com/loomxr/loom/services/renderer => ../services/renderer
	github.com/loomxr/loom/services/secrets => ../services/secrets
	github.com/loomxr/loom/services/watcher => ../services/watcher
)

require google.golang.org/protobuf v1.36.11
