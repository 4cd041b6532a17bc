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
	github.com/antithesishq/antithesis-sdk-go v0.8.0-default-no-op // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/loomxr/loom/proto v0.0.0-00010101000000-000000000000 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/nats-io/jwt/v2 v2.8.2 // indirect
	github.com/nats-io/nats-server/v2 v2.15.2 // indirect
	github.com/nats-io/nats.go v1.55.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/spf13/cobra v1.10.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	k8s.io/apimachinery v0.35.4 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)
