package auth

import (
	"context"
	"crypto"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/golang-jwt/jwt/v5"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// The defaults of VerifierConfig's optional fields.
const (
	DefaultLeeway          = 30 * time.Second
	DefaultIdentityClaim   = "sub"
	DefaultRolesClaim      = "roles"
	DefaultAdapterClaim    = "adapter"
	DefaultRefreshInterval = 5 * time.Minute
)

// The only signing algorithms Verify accepts. Listing them for the parser is what keeps "none" and HMAC out: it
// refuses any other alg before a key is even looked up.
const (
	algRS256 = "RS256"
	algES256 = "ES256"
)

// VerifierConfig says where a Verifier gets its keys and what it requires of a token. Exactly one of JWKSURL and
// JWKSFile must be set; Issuer and Audience are required; the rest default as documented per field.
type VerifierConfig struct {
	// JWKSURL is an http(s) URL serving the issuer's JWK Set. It is fetched by NewVerifier, then again every
	// RefreshInterval and, at most once a minute, when a token names a kid the cached set lacks. Use https: whoever
	// can alter the response can mint tokens.
	JWKSURL string
	// JWKSFile is a file holding a JWK Set (JSON) or one PEM public key or certificate (RSA, or EC on P-256).
	// NewVerifier reads it once (the server builds a new Verifier when the file changes); a PEM key verifies every
	// token whatever its kid, a JWK Set selects keys by kid.
	JWKSFile string
	// Issuer is the exact iss every token must carry.
	Issuer string
	// Audience must be one of the token's aud values.
	Audience string
	// Leeway is the clock skew tolerated on exp, nbf and iat; zero means DefaultLeeway.
	Leeway time.Duration
	// IdentityClaim names the string claim that identifies the caller; empty means DefaultIdentityClaim. A dotted
	// name such as "ext.user" is looked up as a path into nested objects when no claim has that literal name.
	IdentityClaim string
	// RolesClaim names the string-array claim holding roles; empty means DefaultRolesClaim. Dotted names work as for
	// IdentityClaim (e.g. Keycloak's "realm_access.roles"). A token without it has no roles.
	RolesClaim string
	// AdapterClaim names the string claim holding the adapter name; empty means DefaultAdapterClaim.
	AdapterClaim string
	// TenantClaim names the claim (a string or a number; dotted names work as for IdentityClaim) whose value is the
	// caller's tenant, e.g. "org_id", "tid", "hd", or "sub" for a tenant per user. Empty turns tenancy off: no
	// tenant is read.
	TenantClaim string
	// RefreshInterval is how often JWKSURL is fetched again; zero means DefaultRefreshInterval.
	RefreshInterval time.Duration
	// HTTPClient fetches JWKSURL, e.g. one trusting a private CA; nil means a client with default transport.
	HTTPClient *http.Client
	// Logger receives failed refreshes of JWKSURL (periodic or on demand); nil means slog.Default().
	Logger *slog.Logger
}

// Verifier checks bearer tokens. It is safe for concurrent use.
type Verifier struct {
	keys          func(ctx context.Context) jwt.Keyfunc
	parser        *jwt.Parser
	identityClaim string
	rolesClaim    string
	adapterClaim  string
	tenantClaim   string
	// verified remembers the tokens that verified, by their SHA-256 (see cached).
	verified *expirable.LRU[[sha256.Size]byte, *verifiedToken]
}

// verifiedToken is a token that verified: who it says, the key that verified it and when it expires.
type verifiedToken struct {
	id      Identity
	token   *jwt.Token
	key     any
	expires time.Time
}

const (
	// verifiedCacheSize and verifiedCacheTTL bound what cached keeps: a caller that sends one token on every request
	// (an adapter, a CLI session) is checked in full once per TTL.
	verifiedCacheSize = 10000
	verifiedCacheTTL  = 5 * time.Minute
)

// NewVerifier returns a Verifier for cfg, with its keys loaded. It returns an error if cfg sets neither or both of
// JWKSURL and JWKSFile, lacks Issuer or Audience, has a negative duration, if the file cannot be read or parsed, or if
// the key source yields no RSA or EC key (for a URL: if the first fetch fails, so that a wrong URL stops the server
// at start instead of rejecting every request). ctx bounds the background refresh of JWKSURL: cancel it to stop.
func NewVerifier(ctx context.Context, cfg VerifierConfig) (*Verifier, error) {
	switch {
	case cfg.JWKSURL == "" && cfg.JWKSFile == "":
		return nil, errors.New("auth: a JWKS URL or a JWKS/PEM file is required to verify tokens")
	case cfg.JWKSURL != "" && cfg.JWKSFile != "":
		return nil, errors.New("auth: set either a JWKS URL or a JWKS/PEM file, not both")
	case cfg.Issuer == "":
		return nil, errors.New("auth: the token issuer is required")
	case cfg.Audience == "":
		return nil, errors.New("auth: the token audience is required")
	case cfg.Leeway < 0 || cfg.RefreshInterval < 0:
		return nil, errors.New("auth: leeway and refresh interval must not be negative")
	}
	cfg.Leeway = orDefault(cfg.Leeway, DefaultLeeway)
	cfg.RefreshInterval = orDefault(cfg.RefreshInterval, DefaultRefreshInterval)
	cfg.IdentityClaim = orDefault(cfg.IdentityClaim, DefaultIdentityClaim)
	cfg.RolesClaim = orDefault(cfg.RolesClaim, DefaultRolesClaim)
	cfg.AdapterClaim = orDefault(cfg.AdapterClaim, DefaultAdapterClaim)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}

	var (
		keys func(context.Context) jwt.Keyfunc
		err  error
	)
	if cfg.JWKSURL != "" {
		keys, err = remoteKeys(ctx, cfg)
	} else {
		keys, err = fileKeys(cfg.JWKSFile)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return &Verifier{
		keys: keys,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{algRS256, algES256}),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithLeeway(cfg.Leeway),
			jwt.WithExpirationRequired(), // a token without exp would be valid forever
			jwt.WithIssuedAt(),
		),
		identityClaim: cfg.IdentityClaim,
		rolesClaim:    cfg.RolesClaim,
		tenantClaim:   cfg.TenantClaim,
		adapterClaim:  cfg.AdapterClaim,
		verified:      expirable.NewLRU[[sha256.Size]byte, *verifiedToken](verifiedCacheSize, nil, verifiedCacheTTL),
	}, nil
}

// cached returns the identity of a token that verified before, if it has not expired since and the key that
// verified it is still the one its header selects: a signature check (an RSA or ECDSA verification, most of what
// a request with a token costs) is then skipped, while a key the issuer retired or rotated away still stops the
// token at once.
func (v *Verifier) cached(ctx context.Context, sum [sha256.Size]byte) (Identity, bool) {
	e, ok := v.verified.Get(sum)
	if !ok || !time.Now().Before(e.expires) {
		return Identity{}, false
	}
	key, err := v.keys(ctx)(e.token)
	if err != nil || !sameKey(key, e.key) {
		return Identity{}, false
	}
	id := e.id
	id.Roles = slices.Clone(id.Roles) // the caller's to change
	return id, true
}

// sameKey tells whether two verification keys are the same public key.
func sameKey(a, b any) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Verify checks token (the compact JWT, without the "Bearer " prefix) and returns who it identifies, with the roles
// and adapter name it claims. Any failure is a *resource.Error with resource.CodeUnauthenticated whose message says
// what is wrong without echoing the token: a bad signature, an algorithm other than RS256 or ES256, an unknown kid, a
// wrong iss or aud, exp missing or past, nbf or iat in the future (each beyond the leeway), or a missing identity
// claim. Unknown role names in the roles claim are ignored; a roles claim that is not an array of strings is an error.
// ctx bounds the on-demand key refresh an unknown kid may trigger.
func (v *Verifier) Verify(ctx context.Context, token string) (Identity, error) {
	if token == "" {
		return Identity{}, unauthenticated("a bearer token is required")
	}
	sum := sha256.Sum256([]byte(token))
	if id, ok := v.cached(ctx, sum); ok {
		return id, nil
	}
	claims := jwt.MapClaims{}
	keys := v.keys(ctx)
	var key any
	parsed, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		k, err := keys(t)
		key = k
		return k, err
	})
	if err != nil {
		return Identity{}, unauthenticated(rejection(parsed, claims, err))
	}
	id, err := v.identity(claims)
	if err != nil {
		return Identity{}, err
	}
	// Only a token one key verified is remembered: for a token without kid every published key is tried, and
	// which one verified it is not known.
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		if _, set := key.(jwt.VerificationKeySet); !set {
			v.verified.Add(sum, &verifiedToken{id: id, token: parsed, key: key, expires: exp.Time})
		}
	}
	return id, nil
}

// identity reads who the verified claims say the caller is.
func (v *Verifier) identity(claims jwt.MapClaims) (Identity, error) {
	subject, ok := lookupClaim(claims, v.identityClaim).(string)
	if !ok || subject == "" {
		return Identity{}, unauthenticated(fmt.Sprintf("the token has no %q claim to identify the caller", v.identityClaim))
	}
	id := Identity{Subject: subject}
	switch raw := lookupClaim(claims, v.rolesClaim).(type) {
	case nil:
	case []any:
		for _, r := range raw {
			s, ok := r.(string)
			if !ok {
				return Identity{}, unauthenticated(fmt.Sprintf("the token's %q claim must be an array of strings", v.rolesClaim))
			}
			if role := Role(s); role.known() && !id.HasRole(role) {
				id.Roles = append(id.Roles, role)
			}
		}
	default:
		return Identity{}, unauthenticated(fmt.Sprintf("the token's %q claim must be an array of strings", v.rolesClaim))
	}
	switch raw := lookupClaim(claims, v.adapterClaim).(type) {
	case nil:
	case string:
		id.Adapter = raw
	default:
		return Identity{}, unauthenticated(fmt.Sprintf("the token's %q claim must be a string", v.adapterClaim))
	}
	if v.tenantClaim != "" {
		tenant, err := tenantOf(lookupClaim(claims, v.tenantClaim))
		if err != nil {
			return Identity{}, unauthenticated(fmt.Sprintf("the token's tenant claim %q %s", v.tenantClaim, err))
		}
		id.Tenant = tenant
	}
	return id, nil
}

// MaxTenantLength bounds a tenant's name as a token's tenant claim gives it: the domain's bound on a tenant id.
const MaxTenantLength = resource.MaxTenantLength

// tenantOf reads a tenant claim's value: a string, or a number (some issuers number organisations), printable and
// at most MaxTenantLength long; absent is no tenant ("").
func tenantOf(raw any) (string, error) {
	var tenant string
	switch v := raw.(type) {
	case nil:
		return "", nil
	case string:
		tenant = v
	case float64:
		tenant = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return "", errors.New("must be a string or a number")
	}
	if len(tenant) > MaxTenantLength {
		return "", fmt.Errorf("must be at most %d bytes", MaxTenantLength)
	}
	for _, c := range tenant {
		if !unicode.IsPrint(c) {
			return "", errors.New("must be printable text")
		}
	}
	return tenant, nil
}

// lookupClaim returns the claim called name, or, when there is none and name is dotted, the value at that path
// through nested objects. The literal name wins because URL-style claim names ("https://example.com/roles") contain
// dots too.
func lookupClaim(claims jwt.MapClaims, name string) any {
	if v, ok := claims[name]; ok {
		return v
	}
	var cur any = map[string]any(claims)
	for part := range strings.SplitSeq(name, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[part]
	}
	return cur
}

// rejection turns a parse error into a message for the client. The parser's own texts may quote token contents
// (kid, alg), so only fixed phrases are used. Claim problems are listed together because the parser reports them
// together; they are reached only with a valid signature, so they tell a forger nothing.
func rejection(parsed *jwt.Token, claims jwt.MapClaims, err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the bearer token is not a well-formed JWT"
	case parsed != nil && !algAccepted(parsed):
		return "the token's signing algorithm is not accepted: use RS256 or ES256"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// The keyfunc failed: in practice the kid names no key the issuer publishes (even after a refresh).
		return "the token was not signed by a known key of the issuer"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "the token's signature is invalid"
	}
	var reasons []string
	if errors.Is(err, jwt.ErrTokenRequiredClaimMissing) {
		var missing []string
		for _, c := range []string{"exp", "iss", "aud"} {
			if _, ok := claims[c]; !ok {
				missing = append(missing, c)
			}
		}
		reasons = append(reasons, "it lacks required claims "+strings.Join(missing, ", "))
	}
	for _, r := range []struct {
		err error
		msg string
	}{
		{jwt.ErrTokenExpired, "it has expired"},
		{jwt.ErrTokenNotValidYet, "it is not valid yet (nbf)"},
		{jwt.ErrTokenUsedBeforeIssued, "it was issued in the future (iat)"},
		{jwt.ErrTokenInvalidIssuer, "its issuer is not accepted"},
		{jwt.ErrTokenInvalidAudience, "it is not meant for this API (aud)"},
		{jwt.ErrInvalidType, "a registered claim has the wrong type"},
	} {
		if errors.Is(err, r.err) {
			reasons = append(reasons, r.msg)
		}
	}
	if len(reasons) == 0 {
		return "the token is not valid"
	}
	return "the token is rejected: " + strings.Join(reasons, "; ")
}

func algAccepted(t *jwt.Token) bool {
	alg, _ := t.Header["alg"].(string)
	return alg == algRS256 || alg == algES256
}

func unauthenticated(msg string) error {
	return &resource.Error{Code: resource.CodeUnauthenticated, Message: msg}
}

// BearerToken returns the token in an Authorization header value of the form "Bearer <token>" (scheme matched
// case-insensitively). It returns a *resource.Error with resource.CodeUnauthenticated if the header is empty, uses
// another scheme or carries no token.
func BearerToken(header string) (string, error) {
	if header == "" {
		return "", unauthenticated("a bearer token is required: send Authorization: Bearer <token>")
	}
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", unauthenticated("the Authorization header must use the Bearer scheme")
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", unauthenticated("the Authorization header carries no bearer token")
	}
	return token, nil
}
