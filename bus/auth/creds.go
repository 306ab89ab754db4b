package auth

import (
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/jwt/v2"
)

// roleTag starts the user JWT tag that names an identity's role.
const roleTag = "ioa-role:"

// ReadIdentity tells who a .creds file speaks for. Credentials made by
// other tools (nsc) carry no ioa role: they are read as the admin role if
// their permissions are unrestricted and as an agent otherwise, and named
// by the JWT's name.
func ReadIdentity(credsFile string) (Identity, error) {
	b, err := os.ReadFile(credsFile)
	if err != nil {
		return Identity{}, fmt.Errorf("credentials: %w", err)
	}
	tok, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return Identity{}, fmt.Errorf("credentials %s: %w", credsFile, err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return Identity{}, fmt.Errorf("credentials %s: not a user JWT: %w", credsFile, err)
	}
	id := Identity{Name: uc.Name, Role: Agent}
	if len(uc.Pub.Allow) == 0 && len(uc.Sub.Allow) == 0 && len(uc.Pub.Deny) == 0 && len(uc.Sub.Deny) == 0 {
		id.Role = Admin
	}
	for _, t := range uc.Tags {
		if r, ok := strings.CutPrefix(t, roleTag); ok {
			role, err := ParseRole(r)
			if err != nil {
				return Identity{}, fmt.Errorf("credentials %s: %w", credsFile, err)
			}
			id.Role = role
		}
	}
	if id.Role != Admin {
		if err := CheckName(id.Name); err != nil {
			return Identity{}, fmt.Errorf("credentials %s: %w", credsFile, err)
		}
	}
	return id, nil
}
