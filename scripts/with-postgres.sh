#!/usr/bin/env bash
# Runs a command beside a throwaway PostgreSQL cluster: initdb into a temporary directory, a free port on
# 127.0.0.1, run as a non-root user (PostgreSQL refuses to run as root; as root the cluster runs as the
# `postgres` system user the Debian package creates). The command sees HOOKBOT_TEST_POSTGRES_URL; the cluster
# is stopped and its directory removed when the command ends, whatever its outcome.
set -euo pipefail
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/initdb" ] || { echo "with-postgres: PostgreSQL server binaries not found (make postgres installs them)" >&2; exit 1; }
dir=$(mktemp -d /tmp/hookbot-pg.XXXXXX)
as=()
if [ "$(id -u)" = 0 ]; then
    chown postgres: "$dir"
    as=(runuser -u postgres --)
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
stop() {
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap stop EXIT
"${as[@]}" "$bin/initdb" -D "$dir/data" -U hookbot --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=128MB" start >/dev/null ||
    { cat "$dir/server.log" >&2; exit 1; }
export HOOKBOT_TEST_POSTGRES_URL="postgres://hookbot@127.0.0.1:$port/postgres"
echo "with-postgres: throwaway cluster on 127.0.0.1:$port"
set +e
"$@"
status=$?
set -e
exit $status
