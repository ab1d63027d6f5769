#!/bin/bash
# Entrypoint of the hyperfleet/postgres:15 test image (built by build.sh beside this file).
#
# It imitates the parts of the official postgres image's entrypoint that test tools rely on, so that
# testcontainers' postgres module works with this image unchanged: POSTGRES_USER and POSTGRES_DB,
# /docker-entrypoint-initdb.d/*.sql and *.sh, and a "postgres -c name=value ..." command (the module passes
# "postgres -c fsync=off"). POSTGRES_PASSWORD is accepted but ignored: every connection is trusted, which is
# only acceptable because the image exists for throwaway test databases.
set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA

# Same command conventions as the official image: no command or bare flags mean "run the server".
if [ $# -eq 0 ] || [ "${1#-}" != "$1" ]; then
	set -- postgres "$@"
fi
if [ "$1" != postgres ]; then
	exec "$@"
fi
shift

# initdb and postgres refuse to run as root; setpriv (unlike su) execs in place, so the server stays PID 1 and
# receives docker's stop signal directly.
as_postgres=()
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	as_postgres=(setpriv --reuid=postgres --regid=postgres --init-groups)
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	user=${POSTGRES_USER:-postgres}
	db=${POSTGRES_DB:-$user}
	# --no-sync: the data is thrown away with the container, and syncing it slows every container start.
	"${as_postgres[@]}" "$PGBIN/initdb" --username="$user" --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
		--no-sync --no-instructions -D "$PGDATA"
	printf 'host all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n' >>"$PGDATA/pg_hba.conf"

	shopt -s nullglob
	scripts=(/docker-entrypoint-initdb.d/*)
	# The setup server costs a start and a stop, so only pay for it when there is something to set up.
	if [ "$db" != postgres ] || [ ${#scripts[@]} -gt 0 ]; then
		# Socket only, so that a client waiting for the TCP port cannot connect before the setup is done.
		"${as_postgres[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -w -o "-c listen_addresses='' -c fsync=off" start
		psql=("$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 --username="$user" --dbname=postgres)

		if [ "$db" != postgres ]; then
			"${psql[@]}" -v db="$db" <<<'CREATE DATABASE :"db"'
		fi
		for f in "${scripts[@]}"; do
			case "$f" in
			*.sh)
				echo "entrypoint: running $f"
				# shellcheck disable=SC1090
				if [ -x "$f" ]; then "$f"; else . "$f"; fi
				;;
			*.sql)
				echo "entrypoint: running $f"
				"${psql[@]}" --dbname="$db" -f "$f"
				;;
			*) echo "entrypoint: ignoring $f" ;;
			esac
		done

		"${as_postgres[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -w -m fast stop
	fi
fi

exec "${as_postgres[@]}" "$PGBIN/postgres" -D "$PGDATA" -c listen_addresses='*' "$@"
