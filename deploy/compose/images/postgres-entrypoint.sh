#!/bin/bash
# As the postgres image's docker-entrypoint.sh: on an empty PGDATA, initdb (UTF8, no locale) with
# superuser POSTGRES_USER (default postgres) and password POSTGRES_PASSWORD, and create
# POSTGRES_DB (default: the user's name); then exec the command ("postgres -c ...").
set -euo pipefail
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
  user=${POSTGRES_USER:-postgres}
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$user" -E UTF8 --no-locale --auth=scram-sha-256 --pwfile="$pwfile" >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  db=${POSTGRES_DB:-$user}
  if [ "$db" != postgres ]; then
    postgres --single -D "$PGDATA" -c listen_addresses= postgres <<<"CREATE DATABASE \"$db\" OWNER \"$user\";" >/dev/null
  fi
fi
exec "$@"
