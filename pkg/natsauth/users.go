package natsauth

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/nats-io/nats-server/v2/server"
)

// Credentials are a NATS user name and password.
type Credentials struct {
	User     string
	Password string
}

// NewCredentials returns credentials for user with a random password of 32
// hexadecimal characters (128 bits).
func NewCredentials(user string) (Credentials, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Credentials{}, fmt.Errorf("cannot generate a password for NATS user %s: %w", user, err)
	}
	return Credentials{User: user, Password: hex.EncodeToString(b[:])}, nil
}

// ServerUsers returns the users a NATS server needs to enforce Loom's
// authorization: admin without restrictions, and one user per entry of
// processes (keyed by process name) with the permissions For gives a Loom
// service. A process that is not a Loom service (a test provider, for
// instance) gets a user that may neither publish nor subscribe: it can
// connect, and nothing more. Users are sorted by name.
func ServerUsers(admin Credentials, processes map[string]Credentials) ([]*server.User, error) {
	users := []*server.User{{Username: admin.User, Password: admin.Password}}
	for name, c := range processes {
		u := &server.User{Username: c.User, Password: c.Password, Permissions: denyAll()}
		if slices.Contains(Services, name) {
			p, err := For(name)
			if err != nil {
				return nil, err
			}
			u.Permissions = p.server()
		}
		users = append(users, u)
	}
	slices.SortFunc(users, func(a, b *server.User) int {
		switch {
		case a.Username < b.Username:
			return -1
		case a.Username > b.Username:
			return 1
		}
		return 0
	})
	for i := 1; i < len(users); i++ {
		if users[i].Username == users[i-1].Username {
			return nil, fmt.Errorf("cannot configure NATS users: %q is used twice", users[i].Username)
		}
	}
	return users, nil
}

// server converts p to the NATS server's form.
func (p Permissions) server() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: slices.Clone(p.Publish)},
		Subscribe: &server.SubjectPermission{Allow: slices.Clone(p.Subscribe)},
	}
}

// denyAll allows nothing: an empty allow list would allow everything.
func denyAll() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Deny: []string{">"}},
		Subscribe: &server.SubjectPermission{Deny: []string{">"}},
	}
}
