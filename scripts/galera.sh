#!/usr/bin/env bash
# A 3-node MariaDB Galera cluster on loopback for tests and benchmarks.
#
#   scripts/galera.sh up | down | status | kill N | start N | urls
#
# Nodes listen on 127.0.0.1:$GALERA_PORT+N-1 (SQL, default 4406..4408) and
# 127.0.0.1:$GALERA_GCOMM_PORT+10*(N-1) (group communication, IST = +1, SST = +2).
# Data, sockets and logs live under $GALERA_DIR (default /tmp/rpquery-galera), owned by
# the mysql user; the machine's own MariaDB (3306, /var/lib/mysql) is never touched.
# Memory is kept small (16 MiB buffer pool, 40 connections per node).
# GALERA_SYNC_WAIT sets the nodes' default wsrep_sync_wait (default 0: off); the tests'
# `galera` backend uses 7 (reads, updates/deletes and inserts wait until the node has
# applied every write set committed anywhere before), see docs/deployment.md.
# GALERA_KEEP=1 makes `down` stop the nodes but keep $GALERA_DIR (data, the nodes'
# error logs node*.err, their configs), e.g. to read what a failed test run left;
# `up` still starts from an empty directory.
set -euo pipefail

DIR=${GALERA_DIR:-/tmp/rpquery-galera}
PORT=${GALERA_PORT:-4406}
GCOMM=${GALERA_GCOMM_PORT:-14567}
NODES=3
PROVIDER=${GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}
MARIADBD=${MARIADBD:-/usr/sbin/mariadbd}

sql_port() { echo $((PORT + $1 - 1)); }
gcomm_port() { echo $((GCOMM + 10 * ($1 - 1))); }
pidfile() { echo "$DIR/node$1.pid"; }

cluster_address() {
    local addrs=() n
    for n in $(seq 1 $NODES); do addrs+=("127.0.0.1:$(gcomm_port "$n")"); done
    local IFS=,
    echo "gcomm://${addrs[*]}"
}

write_config() {  # write_config N
    local n=$1 g
    g=$(gcomm_port "$n")
    # A tmpdir of its own: servers sharing /tmp clash on their temporary tables' files
    # (the machine's MariaDB saw "Error on delete of '/tmp/#sql-temptable-...MAI'" while
    # a test cluster ran beside it)
    mkdir -p "$DIR/node$n.tmp"; chown mysql:mysql "$DIR/node$n.tmp"
    cat >"$DIR/node$n.cnf" <<CNF
[mysqld]
datadir=$DIR/node$n
socket=$DIR/node$n.sock
tmpdir=$DIR/node$n.tmp
pid-file=$(pidfile "$n")
log-error=$DIR/node$n.err
port=$(sql_port "$n")
bind-address=127.0.0.1
user=mysql
skip-name-resolve
innodb_buffer_pool_size=16M
innodb_log_file_size=16M
max_connections=40
performance_schema=OFF
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_flush_log_at_trx_commit=2
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
wsrep_on=ON
wsrep_provider=$PROVIDER
wsrep_cluster_name=rpquery_test
wsrep_cluster_address=$(cluster_address)
wsrep_node_name=node$n
wsrep_node_address=127.0.0.1:$g
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$((g + 2))
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:$g;ist.recv_addr=127.0.0.1:$((g + 1));gcache.size=32M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;evs.install_timeout=PT6S"
wsrep_slave_threads=2
wsrep_sync_wait=${GALERA_SYNC_WAIT:-0}
CNF
}

q() {  # q N SQL: run SQL on node N as root over its socket
    mariadb --defaults-file=/dev/null -uroot -S "$DIR/node$1.sock" -N -B -e "$2"
}

running() { [[ -f $(pidfile "$1") ]] && kill -0 "$(cat "$(pidfile "$1")")" 2>/dev/null; }

wait_synced() {  # wait_synced N [seconds]
    local n=$1 limit=${2:-180} state
    for _ in $(seq 1 "$limit"); do
        state=$(q "$n" "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2 || true)
        if [[ $state == Synced ]]; then return 0; fi
        if ! running "$n" && [[ -f $(pidfile "$n") ]]; then break; fi
        sleep 1
    done
    echo "galera: node$n did not reach Synced (state: ${state:-down}); log: $DIR/node$n.err" >&2
    tail -n 30 "$DIR/node$n.err" >&2 || true
    return 1
}

launch() {  # launch N [extra mariadbd args]
    local n=$1; shift
    write_config "$n"
    mkdir -p "$DIR/node$n"
    chown -R mysql:mysql "$DIR"
    # Detached from the caller's session so that a finished make/pytest does not end it.
    setsid "$MARIADBD" --defaults-file="$DIR/node$n.cnf" "$@" </dev/null >>"$DIR/node$n.out" 2>&1 &
}

cmd_up() {
    if running 1 || running 2 || running 3; then
        echo "galera: already running under $DIR (scripts/galera.sh down first)" >&2
        cmd_status; return 0
    fi
    rm -rf "$DIR"; mkdir -p "$DIR/node1"; chmod 755 "$DIR"
    chown -R mysql:mysql "$DIR"
    write_config 1
    mariadb-install-db --defaults-file="$DIR/node1.cnf" --auth-root-authentication-method=normal \
        --skip-test-db >"$DIR/install.log" 2>&1 || { cat "$DIR/install.log" >&2; return 1; }
    launch 1 --wsrep-new-cluster
    wait_synced 1
    # root over TCP from 127.0.0.1 without a password (test cluster on loopback only).
    q 1 "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION"
    launch 2; wait_synced 2
    launch 3; wait_synced 3
    cmd_status
}

cmd_start() {  # start N: (re)join a stopped node
    local n=$1
    if running "$n"; then echo "galera: node$n already running"; return 0; fi
    launch "$n"; wait_synced "$n"
    echo "galera: node$n Synced"
}

cmd_kill() {  # kill N: SIGKILL, as a crash
    local n=$1
    if running "$n"; then kill -9 "$(cat "$(pidfile "$n")")"; fi
    for _ in $(seq 1 30); do running "$n" || break; sleep 0.2; done
    rm -f "$(pidfile "$n")"
    echo "galera: node$n killed"
}

cmd_down() {
    local n pid
    for n in 3 2 1; do
        if running "$n"; then
            pid=$(cat "$(pidfile "$n")")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    if [[ ${GALERA_KEEP:-0} == 1 ]]; then
        echo "galera: down (kept $DIR: GALERA_KEEP=1)"
        return 0
    fi
    rm -rf "$DIR"
    echo "galera: down"
}

cmd_status() {
    local n
    for n in $(seq 1 $NODES); do
        if running "$n"; then
            echo "node$n 127.0.0.1:$(sql_port "$n") $(q "$n" "SHOW STATUS WHERE Variable_name IN ('wsrep_local_state_comment','wsrep_cluster_size')" 2>/dev/null | tr '\n\t' '  ')"
        else
            echo "node$n 127.0.0.1:$(sql_port "$n") down"
        fi
    done
}

cmd_urls() {
    local n
    for n in $(seq 1 $NODES); do
        echo "mysql+pymysql://root@127.0.0.1:$(sql_port "$n")/mysql?charset=utf8mb4"
    done
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    urls) cmd_urls ;;
    kill) cmd_kill "${2:?node number}" ;;
    start) cmd_start "${2:?node number}" ;;
    *) echo "usage: $0 up|down|status|urls|kill N|start N" >&2; exit 2 ;;
esac
