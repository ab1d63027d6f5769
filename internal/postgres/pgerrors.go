package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATE codes this package acts on (https://www.postgresql.org/docs/current/errcodes-appendix.html).
const (
	sqlstateUniqueViolation     = "23505"
	sqlstateForeignKeyViolation = "23503"
	sqlstateUndefinedTable      = "42P01"
	sqlstateDeadlock            = "40P01"
	sqlstateSerialization       = "40001"
)

func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func isUndefinedTable(err error) bool { return sqlstate(err) == sqlstateUndefinedTable }
