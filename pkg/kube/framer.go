package kube

import (
	"bytes"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loomxr/loom/pkg/objjson"
)

// objectFramer reads a watch stream's JSON objects, one frame each, by
// finding where each object ends (counting braces outside strings) instead
// of running encoding/json's validating scanner over every byte, as
// client-go's JSON framer does (6 % of the watcher's CPU). The frames are
// validated when they are decoded: the envelope by watchEventSerializer
// and the object by objjson, each falling back to client-go's serializer,
// which reports what is wrong. Writing is the wrapped framer's.
type objectFramer struct {
	runtime.Framer
}

func (objectFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &objectFrames{r: r}
}

// minFrameRead is the least room a read from the stream gets.
const minFrameRead = 32 << 10

// objectFrames is one stream's frame reader. Read returns one whole frame,
// or as much of it as fits with io.ErrShortBuffer and the rest on the
// following calls, as client-go's framers do.
type objectFrames struct {
	r io.ReadCloser
	// buf[start:] is read from the stream and not returned yet.
	buf   []byte
	start int
	// remaining is the part of a frame that did not fit the caller's
	// buffer.
	remaining []byte
	err       error // of the stream's last read
}

func (f *objectFrames) Read(data []byte) (int, error) {
	if len(f.remaining) > 0 {
		n := copy(data, f.remaining)
		f.remaining = f.remaining[n:]
		if len(f.remaining) > 0 {
			return n, io.ErrShortBuffer
		}
		f.remaining = nil
		return n, nil
	}
	for {
		i := skipSpace(f.buf, f.start)
		if i < len(f.buf) {
			if f.buf[i] != '{' {
				return 0, fmt.Errorf("cannot read a watch stream: a frame starts with %q, not a JSON object", f.buf[i])
			}
			if end, ok := objjson.ValueEnd(f.buf, i); ok {
				frame := f.buf[i:end]
				f.start = end
				n := copy(data, frame)
				if n < len(frame) {
					f.remaining = bytes.Clone(frame[n:])
					return n, io.ErrShortBuffer
				}
				return n, nil
			}
		}
		if f.err != nil {
			if i < len(f.buf) && f.err == io.EOF {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, f.err
		}
		// Keep the unread part (from i: spaces are never a frame's) and
		// read more after it.
		n := copy(f.buf, f.buf[i:])
		f.buf, f.start = f.buf[:n], 0
		if cap(f.buf)-len(f.buf) < minFrameRead {
			grown := make([]byte, len(f.buf), max(2*cap(f.buf), len(f.buf)+minFrameRead))
			copy(grown, f.buf)
			f.buf = grown
		}
		m, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
		f.buf = f.buf[:len(f.buf)+m]
		if err != nil {
			f.err = err
		}
	}
}

func (f *objectFrames) Close() error { return f.r.Close() }
