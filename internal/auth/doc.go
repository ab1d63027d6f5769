// Package auth authenticates callers by bearer JWT and authorizes what they may do by role.
//
// It is self-contained: the HTTP edge extracts the bearer token ([BearerToken]), verifies it ([Verifier.Verify]),
// optionally maps the identity through an ACL file ([ACL.Apply]) and asks [Authorize] before each operation. Every
// failure it reports to a caller is a *resource.Error: resource.CodeUnauthenticated (401) when the token does not
// prove who the caller is, resource.CodeForbidden (403) when the caller is known but lacks the role. Messages are safe
// to show to clients and never contain the token.
//
// # Tokens
//
// Only RS256 and ES256 signatures are accepted; "none", HMAC and every other algorithm are rejected before any key is
// looked up, which closes the classic "verify HS256 with the RSA public key as secret" confusion. Keys come from a JWKS
// URL (fetched at start, refreshed in the background, and refreshed on demand, rate-limited, when a token names an
// unknown kid, so an issuer can rotate keys without a restart) or from a file holding a JWKS or a single PEM public key
// or certificate. iss and aud must match, exp is required, and exp, nbf and iat are checked with a leeway (30 s by
// default) for clock skew. The identity is a configurable string claim ("sub" by default); roles come from a
// string-array claim ("roles") and the adapter name from a string claim ("adapter"). Role names a token carries that
// this package does not know (an identity provider shared with other applications has many) are ignored.
//
// # Roles
//
//   - viewer reads.
//   - user reads and creates, patches and deletes resources, but never writes statuses or internal spec fields, and
//     only reads platform objects.
//   - platform reads and creates, patches and deletes platform objects (VersionStreams, UpgradeSchedules: the kinds
//     every cluster shares, so that a change to one rolls every cluster naming it).
//   - adapter reads and writes statuses, and only statuses reported under its own adapter name, on resources of
//     the kinds that require that adapter or that the ACL file lists for it ([AuthorizeReportKind]).
//   - admin may do everything, including internal fields, force-delete and forced transitions (force=true).
//
// # ACL file
//
// When the identity provider cannot put roles into tokens, an ACL file (YAML, or JSON, which is YAML too) grants
// them by identity, the value of the identity claim:
//
//	# identity → roles (viewer, user, platform or admin)
//	users:
//	  alice@example.com: [user]
//	  bob: [viewer]
//	  carol: [viewer, user]
//	# identity → adapter name (a DNS label); grants role adapter, reporting only as that adapter, on the kinds
//	# that require it, and on the kinds listed in the long form
//	adapters:
//	  svc-applier: hostedcluster-applier
//	  svc-auditor: {adapter: auditor, kinds: [clusters, nodepools]}
//	# identities with role admin
//	admins: [root@example.com]
//
// All three sections are optional; an identity may appear in several and then holds the union of their roles.
// Identities match exactly (case-sensitive). Role adapter cannot be granted under users, because an adapter role
// without an adapter name could never report; unknown roles, unknown sections, duplicate identities and empty names
// are errors, so a typo fails at load instead of silently denying (or granting) access.
//
// An ACL is authoritative: [ACL.Apply] replaces the roles and adapter name the token carried with those the file
// grants, and an identity the file does not name gets no roles. Merging with token roles would let anyone able to get
// a token from a shared identity provider with a "roles: [admin]" claim bypass the file.
package auth
