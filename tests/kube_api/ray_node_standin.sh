#!/bin/sh
# The node agent's stand-in for `ray start ... --block` in a KubeRay head or worker pod (see
# kuberay_double.py): no Ray runtime, it says what it stands for and blocks until stopped.
echo "stand-in Ray node: ray $*"
trap 'exit 0' TERM INT
while :; do sleep 1; done
