//go:build tools

// Package deps keeps dependencies in go.mod while the packages that use them are being written. Delete when done.
package deps

import (
	_ "github.com/evanphx/json-patch/v5"
	_ "github.com/fergusstrange/embedded-postgres"
	_ "github.com/getkin/kin-openapi/openapi3"
	_ "github.com/go-gormigrate/gormigrate/v2"
	_ "github.com/google/uuid"
	_ "github.com/gorilla/mux"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/oapi-codegen/runtime"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "github.com/testcontainers/testcontainers-go"
	_ "github.com/testcontainers/testcontainers-go/modules/postgres"
	_ "github.com/yaacov/tree-search-language/v6/pkg/tsl"
	_ "gorm.io/driver/postgres"
	_ "gorm.io/gorm"
)
