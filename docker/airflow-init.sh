#!/usr/bin/env bash
# One-shot init job of the compose stack: migrate the metadata DB and give the simple
# auth manager's admin a known password, then exit 0 so the other Airflow services start.
set -euo pipefail

: "${AIRFLOW_ADMIN_USER:=admin}"
: "${AIRFLOW_ADMIN_PASSWORD:=admin}"
passwords_file="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:?must be set}"

echo "airflow-init: migrating the metadata database"
airflow db migrate

# The simple auth manager only generates random passwords for users missing from this
# file; writing it here makes the admin password the one the operator chose.
mkdir -p "$(dirname "$passwords_file")"
python - "$passwords_file" "$AIRFLOW_ADMIN_USER" "$AIRFLOW_ADMIN_PASSWORD" <<'PY'
import json, os, sys
path, user, password = sys.argv[1:4]
try:
    with open(path) as fh:
        passwords = json.loads(fh.read().strip() or "{}")
except FileNotFoundError:
    passwords = {}
passwords[user] = password
tmp = path + ".tmp"
with open(tmp, "w") as fh:
    json.dump(passwords, fh)
    fh.write("\n")
os.chmod(tmp, 0o600)
os.replace(tmp, path)
PY
echo "airflow-init: user '$AIRFLOW_ADMIN_USER' ready"

# Show that the pre-set connections parse (they come from AIRFLOW_CONN_* variables).
airflow connections get kafka_default -o json >/dev/null
airflow connections get spark_default -o json >/dev/null
echo "airflow-init: connections kafka_default and spark_default present"
