#!/usr/bin/env bash
# A real OpenStack Neutron API on loopback for development and tests: MariaDB, the pinned
# Neutron release in a virtualenv (deploy/neutron/constraints.txt), ML2 with no agents, and
# identity taken from X-Project-Id / X-User-Id / X-Roles headers (no Keystone).
#
#   deploy/neutron/dev-server.sh start    # installs what is missing, starts, prints the URL
#   deploy/neutron/dev-server.sh stop     # stops Neutron, and MariaDB if start started it
#
# Environment: PALISADE_NEUTRON_VENV (default /opt/neutron-venv), PALISADE_NEUTRON_STATE
# (default /tmp/palisade-neutron: configuration, logs, pid file), PALISADE_NEUTRON_PORT
# (default 9696). Installing packages needs root (apt-get) and the package registries.
# On success the last line of output is `export PALISADE_NEUTRON_URL=http://127.0.0.1:PORT`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${PALISADE_NEUTRON_VENV:-/opt/neutron-venv}"
state="${PALISADE_NEUTRON_STATE:-/tmp/palisade-neutron}"
port="${PALISADE_NEUTRON_PORT:-9696}"
url="http://127.0.0.1:$port"

log() { echo "dev-server: $*" >&2; }

install_mariadb() {
  command -v mariadbd >/dev/null 2>&1 && return
  command -v apt-get >/dev/null 2>&1 || { log "MariaDB is missing and apt-get is not available"; exit 1; }
  log "installing MariaDB"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq mariadb-server >/dev/null
}

install_neutron() {
  if [ -x "$venv/bin/gunicorn" ] && "$venv/bin/python" -c 'import neutron, pymysql' 2>/dev/null; then
    return
  fi
  log "installing Neutron into $venv (pinned by constraints.txt)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -c "$here/constraints.txt" neutron gunicorn pymysql
}

start_mariadb() {
  if ! mariadb -uroot -e 'select 1' >/dev/null 2>&1; then
    log "starting MariaDB"
    # Remembered, so `stop` stops the MariaDB this script started (and no other).
    mkdir -p "$state" && touch "$state/mariadb.started"
    service mariadb start >/dev/null 2>&1 || {
      mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
      (mariadbd-safe >/dev/null 2>&1 &)
    }
    for _ in $(seq 1 60); do mariadb -uroot -e 'select 1' >/dev/null 2>&1 && break; sleep 0.5; done
  fi
  mariadb -uroot -e "CREATE DATABASE IF NOT EXISTS neutron;
    CREATE USER IF NOT EXISTS 'neutron'@'localhost' IDENTIFIED BY 'neutron';
    GRANT ALL PRIVILEGES ON neutron.* TO 'neutron'@'localhost';"
}

write_config() {
  mkdir -p "$state/lock"
  sed -e 's/ authtoken keystonecontext / keystonecontext /' \
    "$venv/etc/neutron/api-paste.ini" > "$state/api-paste.ini"
  grep -q 'keystone = .* keystonecontext extensions' "$state/api-paste.ini"
  cat > "$state/neutron.conf" <<CONF
[DEFAULT]
core_plugin = ml2
service_plugins =
transport_url = fake:/
auth_strategy = keystone
api_paste_config = $state/api-paste.ini
debug = false
use_stderr = true
# Listings come in pages of 10, as on deployments that limit them (more tightly): the sync
# follows the next links.
pagination_max_limit = 10
[database]
connection = mysql+pymysql://neutron:neutron@localhost/neutron
[quotas]
quota_security_group = -1
quota_security_group_rule = -1
quota_port = -1
quota_network = -1
quota_subnet = -1
[oslo_concurrency]
lock_path = $state/lock
CONF
  cat > "$state/ml2_conf.ini" <<CONF
[ml2]
type_drivers = local,flat
tenant_network_types = local
mechanism_drivers =
extension_drivers = port_security
[securitygroup]
enable_security_group = true
CONF
  # oslo.config reads sys.argv: the app module must not see gunicorn's arguments.
  cat > "$state/palisade_neutron_app.py" <<PY
import os, sys
os.environ["OS_NEUTRON_CONFIG_DIR"] = "$state"
os.environ["OS_NEUTRON_CONFIG_FILES"] = "$state/neutron.conf;$state/ml2_conf.ini"
_argv, sys.argv = sys.argv, [sys.argv[0]]
from neutron.wsgi.api import application  # noqa: E402
sys.argv = _argv
PY
}

stop() {
  if [ -f "$state/gunicorn.pid" ]; then
    kill "$(cat "$state/gunicorn.pid")" 2>/dev/null || true
    rm -f "$state/gunicorn.pid"
  fi
}
stop_all() {
  stop
  if [ -f "$state/mariadb.started" ]; then
    log "stopping the MariaDB this script started"
    mariadb-admin -uroot shutdown >/dev/null 2>&1 || service mariadb stop >/dev/null 2>&1 || true
    rm -f "$state/mariadb.started"
  fi
}

# Serving, database included: a listing reads the database (the extension list would not,
# so a server whose MariaDB has stopped would pass for ready).
ready() { curl -fsS -m 10 -o /dev/null -H 'X-Project-Id: probe' -H 'X-User-Id: probe' -H 'X-Roles: member' "$url/v2.0/security-groups?limit=1" 2>/dev/null; }

start() {
  if ready; then log "already running at $url"; echo "export PALISADE_NEUTRON_URL=$url"; return; fi
  install_mariadb
  install_neutron
  start_mariadb
  write_config
  "$venv/bin/neutron-db-manage" --config-file "$state/neutron.conf" --config-file "$state/ml2_conf.ini" \
    upgrade heads >"$state/db-manage.log" 2>&1 || { cat "$state/db-manage.log" >&2; exit 1; }
  stop
  # Detached, holding none of this script's descriptors: a caller reading our output
  # through a pipe or $(...) sees it end when the script does.
  (cd "$state" && PYTHONPATH="$state" exec setsid "$venv/bin/gunicorn" --bind "127.0.0.1:$port" \
    --workers 1 --timeout 600 --pid "$state/gunicorn.pid" palisade_neutron_app:application) \
    >"$state/server.log" 2>&1 </dev/null &
  for _ in $(seq 1 120); do
    if ready; then log "Neutron is serving at $url (log: $state/server.log)"; echo "export PALISADE_NEUTRON_URL=$url"; return; fi
    sleep 0.5
  done
  log "Neutron did not start; the end of $state/server.log:"
  tail -n 30 "$state/server.log" >&2
  exit 1
}

case "${1:-start}" in
  start) start ;;
  stop) stop_all ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
