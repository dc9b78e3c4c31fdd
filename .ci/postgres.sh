#!/usr/bin/env bash
# A throwaway PostgreSQL server for pyeino's tests (PostgresCheckPointStore).
#
#   .ci/postgres.sh [start]   install Debian's postgresql if missing (root only), create a cluster in a temp dir,
#                             start it on 127.0.0.1 and print `export PYEINO_TEST_PG_DSN=postgresql://...`;
#                             idempotent: a server already running from the same dir is reused
#   .ci/postgres.sh restart   restart it (the tests use this to check that the store reconnects)
#   .ci/postgres.sh halt      stop it but keep its files (`start` brings it back on the same port; the tests use
#                             this to take the server away in the middle of a run)
#   .ci/postgres.sh stop      stop it and delete its files
#
# Environment: PYEINO_PG_DIR (state directory, default ${TMPDIR:-/tmp}/pyeino-pg), PYEINO_PG_PORT (default: a
# free port, kept for the life of the directory). Run as root (CI), the server runs as the `postgres` user
# (created if missing); otherwise as the current user. Usage from CI: eval "$(.ci/postgres.sh)".
# Only the export line goes to stdout; progress goes to stderr.
set -euo pipefail

cmd=${1:-start}
dir=${PYEINO_PG_DIR:-${TMPDIR:-/tmp}/pyeino-pg}
data=$dir/data

log() { echo "postgres.sh: $*" >&2; }

find_bindir() {
    local d
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir 2>/dev/null || true)
        if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
    fi
    # Debian keeps the server binaries off PATH, one directory per major version: take the newest
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

install_postgres() {
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        log "PostgreSQL is not installed and cannot be installed here (needs root and apt-get)"
        return 1
    fi
    log "installing Debian's postgresql"
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >&2
}

bindir=$(find_bindir || true)
if [ -z "$bindir" ] && [ "$cmd" = start ]; then
    install_postgres
    bindir=$(find_bindir) || { log "no initdb/pg_ctl found after installing"; exit 1; }
fi

# initdb refuses to run as root: the server runs as `postgres` then
if [ "$(id -u)" = 0 ]; then
    runas=postgres
    if ! id "$runas" >/dev/null 2>&1; then
        log "creating system user $runas"
        useradd --system --no-create-home --shell /bin/sh "$runas"
    fi
    as_server() { runuser -u "$runas" -- "$@"; }
else
    runas=$(id -un)
    as_server() { "$@"; }
fi

running() { [ -n "$bindir" ] && [ -f "$data/PG_VERSION" ] && as_server "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; }

print_dsn() { echo "export PYEINO_TEST_PG_DSN=$(cat "$dir/dsn")"; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

case "$cmd" in
start)
    if running; then
        log "already running in $dir"
        print_dsn
        exit 0
    fi
    mkdir -p "$dir"
    chmod 700 "$dir"
    [ "$runas" = "$(id -un)" ] || chown "$runas" "$dir"
    if [ ! -f "$data/PG_VERSION" ]; then
        rm -rf "$data"
        log "initdb in $data"
        as_server "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >&2
        port=${PYEINO_PG_PORT:-$(free_port)}
        echo "$port" >"$dir/port"
        mkdir -p "$dir/sock"
        [ "$runas" = "$(id -un)" ] || chown "$runas" "$dir/sock"
        # a throwaway cluster: durability off for speed
        cat >>"$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir/sock'
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
        echo "postgresql://postgres@127.0.0.1:$port/postgres" >"$dir/dsn"
    fi
    log "starting on port $(cat "$dir/port")"
    as_server "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start >&2 || {
        log "server did not start; its log:"
        cat "$dir/server.log" >&2 || true
        exit 1
    }
    print_dsn
    ;;
restart)
    running || { log "no server running in $dir"; exit 1; }
    as_server "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 -m fast restart >&2
    print_dsn
    ;;
halt)
    running || { log "no server running in $dir"; exit 1; }
    as_server "$bindir/pg_ctl" -D "$data" -w -t 60 -m fast stop >&2
    ;;
stop)
    if running; then
        as_server "$bindir/pg_ctl" -D "$data" -w -t 60 -m fast stop >&2
    fi
    # remove only what start created, in case PYEINO_PG_DIR points somewhere shared
    rm -rf "$data" "$dir/sock" "$dir/server.log" "$dir/port" "$dir/dsn"
    rmdir "$dir" 2>/dev/null || true
    log "stopped"
    ;;
dsn)
    running || { log "no server running in $dir"; exit 1; }
    print_dsn
    ;;
*)
    log "unknown command '$cmd' (start, restart, halt, stop, dsn)"
    exit 2
    ;;
esac
