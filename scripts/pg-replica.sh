#!/usr/bin/env bash
# A PostgreSQL primary and one hot standby (streaming replication) on loopback.
#
#   scripts/pg-replica.sh up | down | status | urls | stop-standby | start-standby
#
# The primary listens on 127.0.0.1:$PG_REPLICA_PORT (default 5442), the standby on the next
# port (5443); both run as the postgres user from $PG_REPLICA_DIR (default
# /tmp/rpquery-pg), trust authentication on loopback only. The machine's own PostgreSQL
# (5432) and its configuration are never touched. The standby is made with
# `pg_basebackup -R` from the primary.
set -euo pipefail

DIR=${PG_REPLICA_DIR:-/tmp/rpquery-pg}
PORT=${PG_REPLICA_PORT:-5442}
SPORT=$((PORT + 1))
BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)}

as_pg() { if [[ $(id -un) == postgres ]]; then "$@"; else runuser -u postgres -- "$@"; fi; }
ctl() { as_pg "$BIN/pg_ctl" -D "$DIR/$1" -l "$DIR/$1.log" -w -t 60 "${@:2}"; }
up_p() { [[ -f $DIR/$1/postmaster.pid ]] && as_pg "$BIN/pg_ctl" -D "$DIR/$1" status >/dev/null 2>&1; }

cmd_up() {
    if up_p primary; then echo "pg-replica: already running under $DIR"; cmd_status; return 0; fi
    rm -rf "$DIR"; mkdir -p "$DIR"; chown postgres:postgres "$DIR"; chmod 700 "$DIR"
    as_pg "$BIN/initdb" -D "$DIR/primary" -U postgres --auth=trust -E UTF8 --no-sync >"$DIR/initdb.log"
    cat >>"$DIR/primary/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DIR'
max_connections = 40
shared_buffers = 16MB
wal_level = replica
max_wal_senders = 4
hot_standby = on
hot_standby_feedback = on
fsync = off
synchronous_commit = local
CONF
    echo "host replication postgres 127.0.0.1/32 trust" >>"$DIR/primary/pg_hba.conf"
    ctl primary start >/dev/null
    as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p "$PORT" -U postgres -D "$DIR/standby" -R -X stream
    echo "port = $SPORT" >>"$DIR/standby/postgresql.auto.conf"
    ctl standby start >/dev/null
    cmd_status
}

cmd_down() {
    local n
    for n in standby primary; do
        if up_p "$n"; then ctl "$n" stop -m fast >/dev/null || true; fi
    done
    rm -rf "$DIR"
    echo "pg-replica: down"
}

cmd_status() {
    local n p
    for n in primary standby; do
        p=$PORT; [[ $n == standby ]] && p=$SPORT
        if up_p "$n"; then
            echo "$n 127.0.0.1:$p in_recovery=$("$BIN/psql" -h 127.0.0.1 -p "$p" -U postgres -Atc 'select pg_is_in_recovery()')"
        else
            echo "$n 127.0.0.1:$p down"
        fi
    done
}

cmd_urls() {
    echo "postgresql+psycopg://postgres@127.0.0.1:$PORT/postgres"
    echo "postgresql+psycopg://postgres@127.0.0.1:$SPORT/postgres"
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    urls) cmd_urls ;;
    stop-standby) ctl standby stop -m fast >/dev/null; echo "pg-replica: standby stopped" ;;
    start-standby) ctl standby start >/dev/null; echo "pg-replica: standby started" ;;
    *) echo "usage: $0 up|down|status|urls|stop-standby|start-standby" >&2; exit 2 ;;
esac
