package service

import (
	"context"
	"log/slog"
	"sync"
)

// warnOnce handles the warnings the API server sends with its responses
// (HTTP Warning headers, code 299): it logs each distinct warning once. The
// API server repeats a warning on every request that earns it, such as
// Crossplane's finalizer name, which is not domain-qualified and must stay
// as it is; client-go's default logs each one, thousands of identical lines
// per thousand claims.
type warnOnce struct {
	log  *slog.Logger
	seen sync.Map // warning text → struct{}
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *warnOnce) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	if _, seen := w.seen.LoadOrStore(text, struct{}{}); seen {
		return
	}
	w.log.WarnContext(ctx, "the API server warns (each distinct warning is logged once)", "warning", text)
}
