package watchreq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/bus/bustest"
	"github.com/loomxr/loom/pkg/testing/poll"
)

// startJetStream runs an in-process NATS server with JetStream on a random
// loopback port for the duration of the test.
func startJetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		t.Fatalf("cannot create NATS server: %v", err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server did not become ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("cannot connect to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("cannot create JetStream context: %v", err)
	}
	return js
}

func TestBucket(t *testing.T) {
	ctx := t.Context()
	js := startJetStream(t)

	kv, err := EnsureBucket(ctx, js, 1)
	if err != nil {
		t.Fatalf("EnsureBucket(): %v", err)
	}
	// A second call finds the same bucket.
	if _, err := EnsureBucket(ctx, js, 1); err != nil {
		t.Fatalf("EnsureBucket() again: %v", err)
	}

	const uid = "0c6f2c5e-8d7a-4f1e-9a51-3b0e1f0d2a11"
	reqs := []Request{{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}}
	if err := Put(ctx, kv, uid, reqs); err != nil {
		t.Fatalf("Put(): %v", err)
	}
	e, err := kv.Get(ctx, uid)
	if err != nil {
		t.Fatalf("Get(): %v", err)
	}
	got, err := Decode(e.Value())
	if err != nil {
		t.Fatalf("Decode(): %v", err)
	}
	if diff := cmp.Diff(reqs, got); diff != "" {
		t.Errorf("stored requests: -want, +got:\n%s", diff)
	}

	// Putting the same requests again writes nothing.
	if err := Put(ctx, kv, uid, reqs); err != nil {
		t.Fatalf("Put() again: %v", err)
	}
	if again, err := kv.Get(ctx, uid); err != nil || again.Revision() != e.Revision() {
		t.Errorf("Put() of unchanged requests wrote a new revision (%v -> %v, err %v)", e.Revision(), again.Revision(), err)
	}

	// Putting nothing deletes the key; deleting twice is fine.
	if err := Put(ctx, kv, uid, nil); err != nil {
		t.Fatalf("Put(nil): %v", err)
	}
	if _, err := kv.Get(ctx, uid); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("Get() after Put(nil): want ErrKeyNotFound, got %v", err)
	}
	if err := Delete(ctx, kv, uid); err != nil {
		t.Errorf("Delete() of a missing key: %v", err)
	}

	if err := Put(ctx, kv, uid, []Request{{Kind: "ConfigMap"}}); err == nil {
		t.Error("Put() of an invalid request: want error, got nil")
	}
}

// On a cluster the bucket gets the replica count asked for, also when it
// exists with another.
func TestBucketReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server cluster")
	}
	c := bustest.RunCluster(t, 3)
	_, js := bustest.Connect(t, c.URLs(), nats.MaxReconnects(-1))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, want := range []int{1, 3} {
		// The cluster may still be electing its meta leader at first.
		err := poll.Wait(ctx, func(ctx context.Context) error {
			actx, acancel := context.WithTimeout(ctx, 5*time.Second)
			defer acancel()
			_, err := EnsureBucket(actx, js, want)
			return err
		}, poll.Every(100*time.Millisecond))
		if err != nil {
			t.Fatalf("EnsureBucket(%d): %v", want, err)
		}
		s, err := js.Stream(ctx, "KV_"+Bucket)
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo()
		if info.Config.Replicas != want || info.Cluster == nil || info.Cluster.Leader == "" {
			t.Errorf("EnsureBucket(%d): stream replicas %d, cluster %+v; want %d with a leader", want, info.Config.Replicas, info.Cluster, want)
		}
	}
}
