{{/* Labels of an object: its component's name and role, as deploy/ gives them. Takes (list $ name component). */}}
{{- define "hyperfleet.labels" -}}
app.kubernetes.io/name: {{ index . 1 }}
app.kubernetes.io/component: {{ index . 2 }}
app.kubernetes.io/part-of: hyperfleet
app.kubernetes.io/managed-by: {{ (index . 0).Release.Service }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
helm.sh/chart: {{ printf "%s-%s" (index . 0).Chart.Name (index . 0).Chart.Version }}
{{- end -}}

{{/* Labels of a pod template: what the selectors and the network policies match. Takes (list name component). */}}
{{- define "hyperfleet.podLabels" -}}
app.kubernetes.io/name: {{ index . 0 }}
app.kubernetes.io/component: {{ index . 1 }}
app.kubernetes.io/part-of: hyperfleet
{{- end -}}

{{- define "hyperfleet.image" -}}
image: {{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
{{- end -}}

{{/* The restricted Pod Security Standard, at pod level: the image's user 65532. */}}
{{- define "hyperfleet.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  # Makes the secret files readable by the group, not the world (defaultMode 0440).
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "hyperfleet.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities:
    drop: [ALL]
{{- end -}}

{{- define "hyperfleet.dbArgs" -}}
- --db-host-file=/etc/hyperfleet/db/db.host
- --db-port-file=/etc/hyperfleet/db/db.port
- --db-name-file=/etc/hyperfleet/db/db.name
- --db-user-file=/etc/hyperfleet/db/db.user
- --db-password-file=/etc/hyperfleet/db/db.password
{{- end -}}

{{- define "hyperfleet.dbVolumeMounts" -}}
- name: db
  mountPath: /etc/hyperfleet/db
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "hyperfleet.dbVolumes" -}}
# Keys db.host, db.port, db.name, db.user, db.password.
- name: db
  secret:
    secretName: {{ .Values.database.secretName }}
    defaultMode: 0440
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{/* The API's settings as HYPERFLEET_<FLAG> variables: the ConfigMap's data, and the migrate hook's env (a
pre-install hook runs before the ConfigMap exists). */}}
{{- define "hyperfleet.apiSettings" -}}
HYPERFLEET_ENV: production
HYPERFLEET_JWK_CERT_URL: {{ .Values.auth.jwkCertURL | quote }}
HYPERFLEET_JWT_ISSUER: {{ .Values.auth.jwtIssuer | quote }}
HYPERFLEET_JWT_AUDIENCE: {{ .Values.auth.jwtAudience | quote }}
{{- with .Values.auth.tenantClaim }}
HYPERFLEET_TENANT_CLAIM: {{ . | quote }}
{{- end }}
{{- with .Values.database.sslMode }}
HYPERFLEET_DB_SSLMODE: {{ . | quote }}
{{- end }}
{{- range $k, $v := .Values.api.extraEnv }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end -}}
