//go:build e2e

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resync restarts the watcher, which publishes a full resync when it
// starts, waits until the bus is drained and the API server quiet, and
// counts the writes that caused.
func (r *run) resync(ctx context.Context) error {
	before, err := r.read(ctx)
	if err != nil {
		return err
	}
	r.marks.resyncFrom = before.at
	logPath := r.s.LogPath("watcher-0")
	var offset int64
	if fi, err := os.Stat(logPath); err == nil {
		offset = fi.Size()
	}
	old := r.s.ServicePID("watcher", 0)
	r.logf("steady state: restarting watcher-0 (pid %d) for a full resync", old)
	if err := r.s.KillService("watcher", 0); err != nil {
		return err
	}
	if err := poll(ctx, time.Minute, 100*time.Millisecond, func() error {
		if p := r.s.ServicePID("watcher", 0); p == 0 || p == old {
			return errors.New("watcher-0 has not restarted")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := poll(ctx, 2*time.Minute, 200*time.Millisecond, func() error {
		b, err := readFrom(logPath, offset)
		if err != nil {
			return err
		}
		if !strings.Contains(b, "resync published") {
			return errors.New("the watcher has not published its initial resync")
		}
		return nil
	}); err != nil {
		r.res.Notes = append(r.res.Notes, "the restarted watcher never logged its resync; waited for quiet instead")
	}
	if err := r.waitQuiet(ctx, "after the resync"); err != nil {
		return err
	}
	after, err := r.read(ctx)
	if err != nil {
		return err
	}
	r.marks.resyncTo = after.at
	d := after.reqs.sub(before.reqs)
	r.res.ResyncAPIWrites = d.sum(func(k requestKey) bool { return isWrite(k) && !isBackgroundWrite(k) })
	r.res.ResyncAPIReads = d.sum(isRead)
	_, r.res.ResyncEventsPublished = after.bus.published(before.bus)
	// A periodic resync shortly before may still be queued (and the
	// restart's events then deduplicated against it): what the services
	// worked through is what was queued, plus what came, minus what is left.
	r.res.ResyncEventsConsumed = int64(before.bus.Pending) + int64(r.res.ResyncEventsPublished) - int64(after.bus.Pending)
	r.res.ResyncSeconds = round(after.at.Sub(before.at).Seconds(), 1)
	// Nothing but the resync's reads runs now: the cost of a read.
	if r.res.ResyncAPIReads > 0 {
		r.res.ResyncCPUMsPerRead = map[string]float64{}
		for _, p := range []string{"kube-apiserver", "etcd"} {
			r.res.ResyncCPUMsPerRead[p] = round((after.cpu[p]-before.cpu[p])*1000/r.res.ResyncAPIReads, 2)
		}
	}
	r.logf("resync: %d events published, %d handled, %.0f API writes, %.0f reads", r.res.ResyncEventsPublished, r.res.ResyncEventsConsumed, r.res.ResyncAPIWrites, r.res.ResyncAPIReads)
	if r.res.ResyncKubeEvents, err = r.eventsSince(ctx, before.at); err != nil {
		return err
	}
	if r.res.ResyncEventsConsumed <= 0 {
		r.res.Notes = append(r.res.Notes, "the services handled no event during the resync: the steady-state check is vacuous")
	}
	return nil
}

func readFrom(path string, offset int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(f)
	return string(b), err
}

// eventsSince describes the Kubernetes Events recorded (or recorded again)
// since t: "<reporting controller>: <reason> <kind>/<name>: <note>". Events
// are API writes too, and the resync must not cause any.
func (r *run) eventsSince(ctx context.Context, t time.Time) ([]string, error) {
	l, err := r.kube.EventsV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot list Events: %w", err)
	}
	var out []string
	for _, e := range l.Items {
		last := e.EventTime.Time
		if e.Series != nil && e.Series.LastObservedTime.After(last) {
			last = e.Series.LastObservedTime.Time
		}
		if e.DeprecatedLastTimestamp.After(last) {
			last = e.DeprecatedLastTimestamp.Time
		}
		if last.Before(t.Truncate(time.Second)) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s %s/%s: %s", e.ReportingController, e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note))
	}
	sort.Strings(out)
	return out, nil
}

// periodicResyncs counts the full resyncs the watcher replicas published
// (log lines msg="resync published") between from and to.
func (r *run) periodicResyncs(from, to time.Time) int {
	n := 0
	for i := 0; i < replicasOf(r.cfg.Replicas, "watcher"); i++ {
		b, err := os.ReadFile(r.s.LogPath(fmt.Sprintf("watcher-%d", i)))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if !strings.Contains(line, `msg="resync published"`) {
				continue
			}
			ts, ok := strings.CutPrefix(line, "time=")
			if !ok {
				continue
			}
			ts, _, _ = strings.Cut(ts, " ")
			t, err := time.Parse(time.RFC3339Nano, ts)
			if err == nil && !t.Before(from) && t.Before(to) {
				n++
			}
		}
	}
	return n
}
