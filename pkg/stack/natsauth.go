package stack

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/loomxr/loom/pkg/natsauth"
)

// natsAuth is the NATS authorization of a stack, the same as production's
// (pkg/natsauth): an administrator, and one user per process with the
// permissions of its service; a process that is not a Loom service (the test
// provider) may connect and nothing else. Passwords are random for each
// stack.
type natsAuth struct {
	admin natsauth.Credentials
	procs map[string]natsauth.Credentials // by process (service) name
}

func newNATSAuth(processes []string) (*natsAuth, error) {
	a := &natsAuth{procs: map[string]natsauth.Credentials{}}
	var err error
	if a.admin, err = natsauth.NewCredentials(natsauth.AdminUser); err != nil {
		return nil, err
	}
	for _, p := range processes {
		if a.procs[p], err = natsauth.NewCredentials(natsauth.User(p)); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// authorize makes the server with opts enforce a. Each server gets users of
// its own.
func (a *natsAuth) authorize(opts *server.Options) error {
	users, err := natsauth.ServerUsers(a.admin, a.procs)
	if err != nil {
		return fmt.Errorf("cannot configure NATS authorization: %w", err)
	}
	opts.Users = users
	return nil
}

// env is the environment that authenticates process (pkg/service reads it);
// nil for a process without a user.
func (a *natsAuth) env(process string) []string {
	c, ok := a.procs[process]
	if !ok {
		return nil
	}
	return []string{"LOOM_NATS_USER=" + c.User, "LOOM_NATS_PASSWORD=" + c.Password}
}

// withUserInfo returns the comma-separated NATS URLs urls with c's user
// name and password in each.
func withUserInfo(urls string, c natsauth.Credentials) string {
	if urls == "" {
		return ""
	}
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(p)
		if err != nil {
			continue
		}
		u.User = url.UserPassword(c.User, c.Password)
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// ServiceNATSURL returns the NATS URL(s) of the stack with the user name and
// password of service's own NATS user, which has exactly the permissions of
// natsauth.For(service); "" if the stack runs no NATS or has no such process.
// Clients connecting with it must use nats.CustomInboxPrefix(natsauth.InboxPrefix(service)),
// as the service does. For tests that check what a service may and may not do.
func (s *Stack) ServiceNATSURL(service string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nats == nil || s.natsAuth == nil {
		return ""
	}
	c, ok := s.natsAuth.procs[service]
	if !ok {
		return ""
	}
	return withUserInfo(s.nats.url(), c)
}
