module github.com/loomxr/loom/cmd/loomctl

go 1.26.0

replace (
	github.com/loomxr/loom/e2e => ../../e2e
	github.com/loomxr/loom/pkg => ../../pkg
	github.com/loomxr/loom/proto => ../../proto
	github.com/loomxr/loom/services/binder => ../../services/binder
	github.com/loomxr/loom/services/renderer => ../../services/renderer
	github.com/loomxr/loom/services/secrets => ../../services/secrets
	github.com/loomxr/loom/services/watcher => ../../services/watcher
)

require github.com/loomxr/loom/pkg v0.0.0-00010101000000-000000000000

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.10.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
