{{/*
One adapter: its ServiceAccount, workload, headless Service and ServiceMonitor, as deploy/hyperfleet/<name> has
them. Takes a dict: root ($), name, port, sharded (`replicas` replicas sharing `shards` leased shards, rolled one
at a time; else one replica with Recreate), replicas, shards, automountToken, args, mounts, volumes (YAML lists,
may be empty), resources.
*/}}
{{- define "hyperfleet.adapter" -}}
{{- $ := .root -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
  labels:
    {{- include "hyperfleet.labels" (list $ .name "adapter") | nindent 4 }}
automountServiceAccountToken: {{ .automountToken }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  labels:
    {{- include "hyperfleet.labels" (list $ .name "adapter") | nindent 4 }}
spec:
  {{- if .sharded }}
  replicas: {{ .replicas }}
  # A new replica takes its share of the leased shards as the old ones give theirs back (docs/shard-leases.md).
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  {{- else }}
  # One decider: an update stops the old pod before the new one starts.
  replicas: 1
  strategy:
    type: Recreate
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
  template:
    metadata:
      labels:
        {{- include "hyperfleet.podLabels" (list .name "adapter") | nindent 8 }}
    spec:
      serviceAccountName: {{ .name }}
      automountServiceAccountToken: {{ .automountToken }}
      enableServiceLinks: false
      # --drain-timeout (30 s) for in-flight reconciles, then the shards handed back, plus margin.
      terminationGracePeriodSeconds: 45
      {{- include "hyperfleet.podSecurityContext" $ | nindent 6 }}
      containers:
        - name: {{ .name }}
          {{- include "hyperfleet.image" $ | nindent 10 }}
          command: [/usr/local/bin/{{ .name }}]
          args:
            - --api-url=http://hyperfleet-api:8000
            - --token-file=/var/run/secrets/hyperfleet/token/token
            - --ops-bind-address=:{{ .port }}
            {{- if .sharded }}
            - --shard-leases
            - --shard-count={{ .shards }}
            - --replica=$(POD_NAME)
            {{- end }}
            {{- with .args }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          env:
            - name: HYPERFLEET_ENV
              value: production
            {{- if .sharded }}
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            {{- end }}
          ports:
            - name: ops
              containerPort: {{ .port }}
          startupProbe:
            httpGet: {path: /healthz, port: ops}
            periodSeconds: 5
            failureThreshold: 60
          livenessProbe:
            httpGet: {path: /healthz, port: ops}
            periodSeconds: 10
            failureThreshold: 6
          readinessProbe:
            httpGet: {path: /readyz, port: ops}
            periodSeconds: 5
          resources:
            {{- toYaml .resources | nindent 12 }}
          {{- include "hyperfleet.containerSecurityContext" $ | nindent 10 }}
          volumeMounts:
            - name: token
              mountPath: /var/run/secrets/hyperfleet/token
              readOnly: true
            - name: tmp
              mountPath: /tmp
            {{- with .mounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        # The adapter's bearer token for the API under the key token (role adapter, adapter name {{ .name }}).
        - name: token
          secret:
            secretName: {{ .name }}-token
            defaultMode: 0440
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- with .volumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ .name }}
  labels:
    {{- include "hyperfleet.labels" (list $ .name "adapter") | nindent 4 }}
spec:
  clusterIP: None
  selector:
    app.kubernetes.io/name: {{ .name }}
  ports:
    - name: ops
      port: {{ .port }}
      targetPort: ops
{{- if $.Values.serviceMonitor.enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ .name }}
  labels:
    {{- include "hyperfleet.labels" (list $ .name "adapter") | nindent 4 }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
  endpoints:
    - port: ops
      path: /metrics
      interval: 30s
{{- end }}
{{- end -}}
