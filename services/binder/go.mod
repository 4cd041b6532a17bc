module github.com/loomxr/loom/services/binder

go 1.26.0

replace (
	github.com/loomxr/loom/cmd/loomctl => ../../cmd/loomctl
	github.com/loomxr/loom/e2e => ../../e2e
	github.com/loomxr/loom/pkg => ../../pkg
	github.com/loomxr/loom/proto => ../../proto
	github.com/loomxr/loom/services/renderer => ../../services/renderer
	github.com/loomxr/loom/services/secrets => ../../services/secrets
	github.com/loomxr/loom/services/watcher => ../../services/watcher
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/loomxr/loom/pkg v0.0.0-00010101000000-000000000000
	k8s.io/api v0.35.4 // indirect
	k8s.io/apimachinery v0.35.4 // indirect
	k8s.io/client-go v0.35.4 // indirect
)
