#!/usr/bin/env bash
# Container entry point: start sshd on $TFNHR_SSH_PORT (for multi-node horovodrun over ssh),
# then run the command (default `make demo`).  TFNHR_SSHD=0 skips sshd.
set -euo pipefail
if [ "${TFNHR_SSHD:-1}" = 1 ]; then
  ssh-keygen -A >/dev/null
  /usr/sbin/sshd -p "${TFNHR_SSH_PORT:-2222}"
fi
exec "$@"
