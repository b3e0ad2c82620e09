#!/usr/bin/env bash
# Installs the Debian tools the tests drive, when missing and when we may (root).
set -euo pipefail
need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing: ${need[*]} (install them with apt-get as root)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
