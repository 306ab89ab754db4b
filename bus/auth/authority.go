package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Files of an authority's directory. The .nk files are nkey seeds (secret);
// the .jwt files are public.
const (
	OperatorSeedFile  = "operator.nk"
	OperatorJWTFile   = "operator.jwt"
	AccountSeedFile   = "account.nk"
	AccountJWTFile    = "account.jwt"
	SystemSeedFile    = "system.nk"
	SystemJWTFile     = "system.jwt"
	ServerConfigFile  = "nats-server.conf"
	operatorName      = "ioa"
	accountName       = "IOA"
	systemAccountName = "SYS"
)

// Authority holds the operator, the runtime's account and the system
// account, and issues user credentials signed by the account.
type Authority struct {
	dir      string
	operator *jwt.OperatorClaims
	opJWT    string
	account  *jwt.AccountClaims
	accJWT   string
	accKey   nkeys.KeyPair
	system   *jwt.AccountClaims
	sysJWT   string
}

// LoadOrCreate reads the authority kept in dir, or creates one there (the
// directory is made private) when dir holds none yet.
func LoadOrCreate(dir string) (*Authority, error) {
	if _, err := os.Stat(filepath.Join(dir, AccountSeedFile)); errors.Is(err, fs.ErrNotExist) {
		if err := create(dir); err != nil {
			return nil, err
		}
	}
	return Load(dir)
}

// Load reads the authority kept in dir.
func Load(dir string) (*Authority, error) {
	a := &Authority{dir: dir}
	var err error
	read := func(name string) string {
		if err != nil {
			return ""
		}
		var b []byte
		b, err = os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			err = fmt.Errorf("auth: %w", err)
		}
		return strings.TrimSpace(string(b))
	}
	a.opJWT, a.accJWT, a.sysJWT = read(OperatorJWTFile), read(AccountJWTFile), read(SystemJWTFile)
	accSeed := read(AccountSeedFile)
	if err != nil {
		return nil, err
	}
	if a.operator, err = jwt.DecodeOperatorClaims(a.opJWT); err != nil {
		return nil, fmt.Errorf("auth: %s: %w", OperatorJWTFile, err)
	}
	if a.account, err = jwt.DecodeAccountClaims(a.accJWT); err != nil {
		return nil, fmt.Errorf("auth: %s: %w", AccountJWTFile, err)
	}
	if a.system, err = jwt.DecodeAccountClaims(a.sysJWT); err != nil {
		return nil, fmt.Errorf("auth: %s: %w", SystemJWTFile, err)
	}
	if a.accKey, err = nkeys.FromSeed([]byte(accSeed)); err != nil {
		return nil, fmt.Errorf("auth: %s: %w", AccountSeedFile, err)
	}
	if pub, _ := a.accKey.PublicKey(); pub != a.account.Subject {
		return nil, fmt.Errorf("auth: %s does not belong to %s", AccountSeedFile, AccountJWTFile)
	}
	return a, nil
}

// create makes the operator, the account with JetStream enabled and the
// system account, and writes them to dir.
func create(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	op, err := nkeys.CreateOperator()
	if err != nil {
		return err
	}
	acc, err := nkeys.CreateAccount()
	if err != nil {
		return err
	}
	sys, err := nkeys.CreateAccount()
	if err != nil {
		return err
	}
	opPub, _ := op.PublicKey()
	accPub, _ := acc.PublicKey()
	sysPub, _ := sys.PublicKey()

	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = operatorName
	oc.SystemAccount = sysPub
	opJWT, err := oc.Encode(op)
	if err != nil {
		return fmt.Errorf("auth: operator: %w", err)
	}
	ac := jwt.NewAccountClaims(accPub)
	ac.Name = accountName
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1, MaxAckPending: -1}
	accJWT, err := ac.Encode(op)
	if err != nil {
		return fmt.Errorf("auth: account: %w", err)
	}
	sc := jwt.NewAccountClaims(sysPub)
	sc.Name = systemAccountName
	sysJWT, err := sc.Encode(op)
	if err != nil {
		return fmt.Errorf("auth: system account: %w", err)
	}
	seed := func(kp nkeys.KeyPair) string { s, _ := kp.Seed(); return string(s) }
	files := []struct {
		name, data string
		mode       os.FileMode
	}{
		{OperatorSeedFile, seed(op), 0o600}, {AccountSeedFile, seed(acc), 0o600}, {SystemSeedFile, seed(sys), 0o600},
		{OperatorJWTFile, opJWT, 0o644}, {AccountJWTFile, accJWT, 0o644}, {SystemJWTFile, sysJWT, 0o644},
	}
	// The account seed is written last: its presence marks a complete
	// authority, so a crash halfway leaves a directory that is made again.
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		if err := writeFileAtomic(filepath.Join(dir, f.name), []byte(f.data+"\n"), f.mode); err != nil {
			return err
		}
	}
	return nil
}

// Dir is where the authority is kept.
func (a *Authority) Dir() string { return a.dir }

// Operator is the trusted operator's claims.
func (a *Authority) Operator() *jwt.OperatorClaims { return a.operator }

// AccountPublicKey names the runtime's account.
func (a *Authority) AccountPublicKey() string { return a.account.Subject }

// AccountJWTs maps each account's public key to its JWT, for a resolver.
func (a *Authority) AccountJWTs() map[string]string {
	return map[string]string{a.account.Subject: a.accJWT, a.system.Subject: a.sysJWT}
}

// SystemAccount is the system account's public key.
func (a *Authority) SystemAccount() string { return a.system.Subject }

// Identity is who a set of credentials speaks for.
type Identity struct {
	Name string
	Role Role
}

// Issue returns a .creds file for identity id under subject prefix p: a
// user JWT with the role's permissions, signed by the account, and the
// user's new seed.
func (a *Authority) Issue(id Identity, p string) ([]byte, error) {
	perm, err := Permissions(id.Role, id.Name, p)
	if err != nil {
		return nil, err
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.Name = id.Name
	uc.IssuerAccount = "" // signed by the account key itself
	uc.Permissions = perm
	uc.Tags.Add(roleTag + string(id.Role))
	tok, err := uc.Encode(a.accKey)
	if err != nil {
		return nil, fmt.Errorf("auth: user %s: %w", id.Name, err)
	}
	seed, err := user.Seed()
	if err != nil {
		return nil, err
	}
	return jwt.FormatUserConfig(tok, seed)
}

// WriteCreds issues credentials for id and writes them to file (mode 0600).
func (a *Authority) WriteCreds(file string, id Identity, p string) error {
	creds, err := a.Issue(id, p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return writeFileAtomic(file, creds, 0o600)
}

// ServerConfig is a nats-server configuration fragment that makes an
// external server (or every node of a cluster) trust this authority:
// `include` it from the server's own configuration.
func (a *Authority) ServerConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Trust the ioa operator (written by ioa; include this file from nats-server.conf).\n")
	fmt.Fprintf(&b, "operator: %q\n", filepath.Join(a.absDir(), OperatorJWTFile))
	fmt.Fprintf(&b, "system_account: %s\n", a.system.Subject)
	fmt.Fprintf(&b, "resolver: MEMORY\n")
	fmt.Fprintf(&b, "resolver_preload: {\n")
	fmt.Fprintf(&b, "  %s: %q\n", a.account.Subject, a.accJWT)
	fmt.Fprintf(&b, "  %s: %q\n", a.system.Subject, a.sysJWT)
	fmt.Fprintf(&b, "}\n")
	return b.String()
}

// WriteServerConfig writes ServerConfig to ServerConfigFile in the
// authority's directory.
func (a *Authority) WriteServerConfig() error {
	return writeFileAtomic(filepath.Join(a.dir, ServerConfigFile), []byte(a.ServerConfig()), 0o644)
}

func (a *Authority) absDir() string {
	if d, err := filepath.Abs(a.dir); err == nil {
		return d
	}
	return a.dir
}

func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}
