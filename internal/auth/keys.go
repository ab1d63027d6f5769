package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

const (
	// fetchTimeout bounds one JWKS fetch, and how long a request with an unknown kid may wait for the on-demand
	// refresh (rate limiter included): past it the request is rejected rather than piling up.
	fetchTimeout = 10 * time.Second
	// unknownKIDRefreshEvery rate-limits on-demand refreshes, so a stream of tokens with made-up kids costs the
	// issuer one fetch a minute, while a freshly rotated key is normally picked up by its first token.
	unknownKIDRefreshEvery = time.Minute
	// minRSABits is the smallest RSA modulus accepted for RS256 (NIST SP 800-131A).
	minRSABits = 2048
)

// signingUses are the JWK "use" values a verification key may carry: "sig", or none at all, which most issuers omit.
// A key published for encryption is never used to verify.
func signingUses() []jwkset.USE { return []jwkset.USE{jwkset.UseSig, ""} }

// remoteKeys fetches cfg.JWKSURL and keeps it fresh until ctx is done.
func remoteKeys(ctx context.Context, cfg VerifierConfig) (func(context.Context) jwt.Keyfunc, error) {
	// jwkset starts the refresh goroutine before the first fetch; stop it if the verifier is not built.
	ctx, cancel := context.WithCancel(ctx)
	built := false
	defer func() {
		if !built {
			cancel()
		}
	}()
	remote, err := jwkset.NewStorageFromHTTP(cfg.JWKSURL, jwkset.HTTPClientStorageOptions{
		Client:          cfg.HTTPClient,
		Ctx:             ctx,
		HTTPTimeout:     fetchTimeout,
		RefreshInterval: cfg.RefreshInterval,
		RefreshErrorHandler: func(ctx context.Context, err error) {
			cfg.Logger.WarnContext(ctx, "refreshing the JWKS failed; the keys fetched before stay in use",
				"url", cfg.JWKSURL, "error", err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", cfg.JWKSURL, err)
	}
	store, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{cfg.JWKSURL: remote},
		RateLimitWaitMax:  fetchTimeout,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(unknownKIDRefreshEvery), 1),
	})
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", cfg.JWKSURL, err)
	}
	keys, err := keysFrom(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", cfg.JWKSURL, err)
	}
	built = true
	return keys, nil
}

// fileKeys reads a JWK Set or a single PEM public key or certificate from path.
func fileKeys(path string) (func(context.Context) jwt.Keyfunc, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key file: %w", err)
	}
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("-----BEGIN")) {
		key, err := parsePEMKey(raw)
		if err != nil {
			return nil, fmt.Errorf("key file %s: %w", path, err)
		}
		// One pinned key: a kid in the token selects nothing, so it is not compared.
		static := func(*jwt.Token) (any, error) { return key, nil }
		return func(context.Context) jwt.Keyfunc { return static }, nil
	}
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("key file %s is neither PEM nor a JWK Set: %w", path, err)
	}
	store, err := set.ToStorage()
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	keys, err := keysFrom(context.Background(), store)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return keys, nil
}

// keysFrom checks that store holds a usable key and returns the keyfunc selecting from it by kid (all keys for a
// token without kid), restricted to usable keys.
func keysFrom(ctx context.Context, store jwkset.Storage) (func(context.Context) jwt.Keyfunc, error) {
	all, err := store.KeyReadAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("read keys: %w", err)
	}
	usable := 0
	for i := range all {
		if checkKey(publicOf(all[i].Key())) == nil {
			usable++
		}
	}
	if usable == 0 {
		return nil, fmt.Errorf("the JWK Set has no RSA (at least %d bits) or P-256 EC key among its %d keys", minRSABits, len(all))
	}
	kf, err := keyfunc.New(keyfunc.Options{Storage: store, UseWhitelist: signingUses()})
	if err != nil {
		return nil, fmt.Errorf("keyfunc: %w", err)
	}
	return func(ctx context.Context) jwt.Keyfunc { return onlyUsable(kf.KeyfuncCtx(ctx)) }, nil
}

// onlyUsable filters what kf returns through checkKey, so that a weak or odd key an issuer publishes next to its
// real ones (or a symmetric one) can never verify a token.
func onlyUsable(kf jwt.Keyfunc) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		key, err := kf(t)
		if err != nil {
			return nil, err
		}
		if set, ok := key.(jwt.VerificationKeySet); ok {
			var usable jwt.VerificationKeySet
			for _, k := range set.Keys {
				if checkKey(k) == nil {
					usable.Keys = append(usable.Keys, k)
				}
			}
			return usable, nil
		}
		if err := checkKey(key); err != nil {
			return nil, err
		}
		return key, nil
	}
}

func publicOf(key any) any {
	if k, ok := key.(interface{ Public() crypto.PublicKey }); ok {
		return k.Public()
	}
	return key
}

// checkKey returns nil for the keys RS256 and ES256 can use safely: RSA public keys of at least minRSABits and EC
// public keys on P-256.
func checkKey(key any) error {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return fmt.Errorf("RSA key has %d bits, fewer than %d", k.N.BitLen(), minRSABits)
		}
		return nil
	case *ecdsa.PublicKey:
		if k.Curve.Params().Name != "P-256" {
			return fmt.Errorf("EC key is on %s, but ES256 needs P-256", k.Curve.Params().Name)
		}
		return nil
	}
	return fmt.Errorf("a %T cannot verify RS256 or ES256", key)
}

// parsePEMKey returns the one public key in raw: a PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE block.
func parsePEMKey(raw []byte) (any, error) {
	block, rest := pem.Decode(raw)
	if block == nil {
		return nil, errors.New("no PEM block found")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("more than one PEM block: use a JWK Set for several keys")
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
		// The API only verifies; a signing key on its disk is one more place for it to leak from.
		return nil, fmt.Errorf("the PEM block is a %s: give the API only the public key", block.Type)
	default:
		return nil, fmt.Errorf("unsupported PEM block %q: want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", block.Type, err)
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	return key, nil
}
