#!/bin/sh
# Writes the compose stack's secrets once, with random values (existing files are kept):
#   compose/secrets/postgres_password, redis_password, grafana_admin_password
#   compose/toolgate.env   TOOLGATE__STORAGE__URL and TOOLGATE__LIMITS__REDIS__URL (the same
#                          passwords), TOOLGATE__SERVER__STATE_SECRET and
#                          TOOLGATE__SESSIONS__SECRET, from toolgate.env.example
# All git-ignored (compose/.gitignore), mode 0600 (0644 for the files compose passes to the
# Postgres/Redis/Grafana images as secrets, whose non-root users must read them: keep the
# directory itself private, mode 0700).
set -eu
cd "$(dirname "$0")"
umask 077
mkdir -p secrets
chmod 700 secrets

random() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }

for name in postgres_password redis_password grafana_admin_password; do
  if [ ! -s "secrets/$name" ]; then
    random >"secrets/$name"
    echo "wrote compose/secrets/$name"
  fi
  chmod 644 "secrets/$name"
done

if [ ! -s toolgate.env ]; then
  pg=$(cat secrets/postgres_password)
  redis=$(cat secrets/redis_password)
  sed -e "s|^TOOLGATE__STORAGE__URL=.*|TOOLGATE__STORAGE__URL=postgres://toolgate:${pg}@postgres:5432/toolgate|" \
      -e "s|^TOOLGATE__SERVER__STATE_SECRET=.*|TOOLGATE__SERVER__STATE_SECRET=$(random)|" \
      -e "s|^TOOLGATE__SESSIONS__SECRET=.*|TOOLGATE__SESSIONS__SECRET=$(random)|" \
      -e "s|^TOOLGATE__LIMITS__REDIS__URL=.*|TOOLGATE__LIMITS__REDIS__URL=redis://:${redis}@redis:6379|" \
      toolgate.env.example >toolgate.env
  echo "wrote compose/toolgate.env"
fi
