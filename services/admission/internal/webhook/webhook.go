// Package webhook serves Kubernetes validating admission webhooks over
// HTTPS: it decodes an AdmissionReview, hands its request to a Validator and
// encodes the verdict. It knows nothing of what is validated.
package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Validator decides one admission request. A nil error admits it, with
// the warnings shown to the client; an error denies it. An error that is a
// Kubernetes API status error (k8s.io/apimachinery/pkg/api/errors) is
// returned to the client as it is, so that its code, reason and causes
// survive; any other error becomes a 403 Forbidden with its message.
// Validate must not block longer than ctx allows: the API server gives up
// after the webhook's timeout.
type Validator interface {
	Validate(ctx context.Context, req *admissionv1.AdmissionRequest) (warnings []string, err error)
}

// A ValidatorFn is a function that is a Validator.
type ValidatorFn func(ctx context.Context, req *admissionv1.AdmissionRequest) ([]string, error)

// Validate calls fn.
func (fn ValidatorFn) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) ([]string, error) {
	return fn(ctx, req)
}

// maxBody bounds an AdmissionReview: the API server's own request limit is
// 3 MiB, and a review carries the object twice (object and oldObject).
const maxBody = 8 << 20

// Handler returns an http.Handler that answers AdmissionReviews (v1) with
// v's verdicts.
func Handler(v Validator, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "admission reviews are POSTed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			http.Error(w, fmt.Sprintf("cannot read request: %v", err), http.StatusBadRequest)
			return
		}
		if len(body) > maxBody {
			http.Error(w, "admission review too large", http.StatusRequestEntityTooLarge)
			return
		}
		review := &admissionv1.AdmissionReview{}
		if err := json.Unmarshal(body, review); err != nil {
			http.Error(w, fmt.Sprintf("cannot decode admission review: %v", err), http.StatusBadRequest)
			return
		}
		if review.Request == nil {
			http.Error(w, "admission review has no request", http.StatusBadRequest)
			return
		}
		out := &admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
			Response: Respond(r.Context(), v, review.Request),
		}
		if !out.Response.Allowed {
			log.Debug("denied", "kind", review.Request.Kind.Kind, "name", review.Request.Name, "operation", review.Request.Operation,
				"reason", out.Response.Result.Message)
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(out); err != nil {
			log.Warn("cannot write admission response", "err", err)
		}
	})
}

// Respond runs v on req and returns the response the API server expects.
func Respond(ctx context.Context, v Validator, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	warnings, err := v.Validate(ctx, req)
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: err == nil, Warnings: warnings}
	if err == nil {
		return resp
	}
	var se kerrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		resp.Result = &st
		return resp
	}
	resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: err.Error()}
	return resp
}

// A Server serves webhooks over HTTPS with a certificate it reads from
// files, and reads them again when they change (a mounted Secret that is
// renewed), so that a new certificate needs no restart.
type Server struct {
	addr     string
	certFile string
	keyFile  string
	mux      *http.ServeMux
	log      *slog.Logger

	mu       sync.Mutex
	cert     *tls.Certificate
	certMod  time.Time
	keyMod   time.Time
	listener net.Listener
}

// NewServer returns a Server for addr (host:port) with the PEM certificate
// and key files. It does not listen until Start.
func NewServer(addr, certFile, keyFile string, log *slog.Logger) *Server {
	return &Server{addr: addr, certFile: certFile, keyFile: keyFile, mux: http.NewServeMux(), log: log}
}

// Handle registers h at path (for example /validate-no-usages).
func (s *Server) Handle(path string, h http.Handler) { s.mux.Handle("POST "+path, h) }

// Start loads the certificate, listens and serves in the background until
// ctx ends. It returns an error if the certificate cannot be loaded or the
// address cannot be listened on.
func (s *Server) Start(ctx context.Context) error {
	if _, err := s.certificate(nil); err != nil {
		return err
	}
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", s.addr, err)
	}
	s.mu.Lock()
	s.listener = l
	s.mu.Unlock()
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certificate},
	}
	go func() {
		<-ctx.Done()
		// ctx is done: the shutdown gets a deadline of its own.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("webhook server failed", "addr", s.addr, "err", err)
		}
	}()
	return nil
}

// Addr returns the address the server listens on, once started.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return ""
	}
	return s.listener.Addr().String()
}

// certificate returns the serving certificate, reloading the files when
// either changed since the last load. A reload that fails keeps the old
// certificate (the files may be mid-update) and is logged.
func (s *Server) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cs, cerr := os.Stat(s.certFile)
	ks, kerr := os.Stat(s.keyFile)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cerr == nil && kerr == nil && s.cert != nil && cs.ModTime().Equal(s.certMod) && ks.ModTime().Equal(s.keyMod) {
		return s.cert, nil
	}
	c, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		if s.cert != nil {
			s.log.Warn("cannot reload the serving certificate; keeping the previous one", "cert", s.certFile, "err", err)
			return s.cert, nil
		}
		return nil, fmt.Errorf("cannot load serving certificate %s and key %s: %w", s.certFile, s.keyFile, err)
	}
	s.cert = &c
	if cerr == nil && kerr == nil {
		s.certMod, s.keyMod = cs.ModTime(), ks.ModTime()
	}
	return s.cert, nil
}
