# tfnhr image for cloud VMs: TensorFlow 2.18 + Horovod 0.28.1 (Gloo + Open MPI) + sshd for
# multi-node horovodrun.  Build:  docker build -t tfnhr .        (add --build-arg TFNHR_TF=cuda on GPU hosts)
# One node:   docker run --rm tfnhr                              (runs the main job, `make demo`)
# Multi-node: see README "Docker on cloud VMs" (--network=host, sshd on port 2222, horovodrun -p 2222).
FROM python:3.11-slim-bookworm

ARG TFNHR_TF=cpu
ENV DEBIAN_FRONTEND=noninteractive \
    TFNHR_TF=${TFNHR_TF} \
    TFNHR_SSH_PORT=2222 \
    OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Build tools, Open MPI and sshd (scripts/setup.sh would apt-get the first two itself as root;
# installing them here keeps them in a cached layer).
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake make git \
        libopenmpi-dev openmpi-bin openssh-server openssh-client \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /run/sshd \
 && sed -i 's/^#\?Port .*/Port 2222/; s/^#\?PermitRootLogin .*/PermitRootLogin prohibit-password/' /etc/ssh/sshd_config \
 && printf 'Host *\n  Port 2222\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n' >> /etc/ssh/ssh_config

WORKDIR /workspace
COPY . /workspace

# The same set-up as `make setup` (one source of truth): venv, pinned stack, Horovod from source.
RUN TFNHR_VENV=/workspace/.venv ./scripts/setup.sh
ENV PATH=/workspace/.venv/bin:${PATH}
RUN horovodrun --check-build

EXPOSE 2222
ENTRYPOINT ["/workspace/scripts/docker-entrypoint.sh"]
CMD ["make", "demo"]
