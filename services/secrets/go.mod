module github.com/loomxr/loom/services/secrets

go 1.26.0

replace (
	github.com/loomxr/loom/cmd/loomctl => ../../cmd/loomctl
	github.com/loomxr/loom/e2e => ../../e2e
	github.com/loomxr/loom/pkg => ../../pkg
	github.com/loomxr/loom/proto => ../../proto
	github.com/loomxr/loom/services/binder => ../../services/binder
	github.com/loomxr/loom/services/renderer => ../../services/renderer
	github.com/loomxr/loom/services/watcher => ../../services/watcher
)

require github.com/loomxr/loom/pkg v0.0.0-00010101000000-000000000000
